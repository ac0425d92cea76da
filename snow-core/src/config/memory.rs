//! What a source task needs of its component's memory, so that `validate` refuses settings that
//! cannot fit instead of the component trapping when it runs out.
//!
//! The host passes its `component.memory.max.bytes` in the configuration; a host that does not
//! gets no check. The estimate, per table (each runs in its own instance):
//!
//! * the dedup window: [`DEDUP_BYTES_PER_VERSION`] per version of `snow.dedup.window.size`
//!   (a version's size, 80 bytes, twice that while its buffer grows);
//! * pages: [`PAGES_HELD`] pages (the one being parsed, the one read ahead, and the records built
//!   from it) of the widest window the table may ask for (`batch.size`, or
//!   `hidden.window.max.rows` when crossing hidden rows) at [`ROW_BYTES`] a row;
//! * [`BASE_BYTES`] for code, stack and everything else.

use super::reader::ConfigReader;

/// The host's memory cap for one component instance.
pub const MEMORY_KEY: &str = "component.memory.max.bytes";

/// Bytes a dedup version may take: its size, doubled for a buffer that grows by doubling.
pub const DEDUP_BYTES_PER_VERSION: u64 = 2 * crate::cursor::dedup::VERSION_BYTES as u64;

/// Bytes assumed per row of a page: wide rows of a few dozen fields with display values.
pub const ROW_BYTES: u64 = 4096;

/// Pages a table holds at once.
pub const PAGES_HELD: u64 = 3;

/// Code, stack and the rest of the heap.
pub const BASE_BYTES: u64 = 16 << 20;

/// Bytes a snapshot table takes per key its topic holds: the key's entry in the map of what the
/// topic holds (its slot, the id and allocator overhead, about 90 bytes), and while it opens the
/// read-back's line and its parsed pair (about 80 more).
pub const SNAPSHOT_BYTES_PER_KEY: u64 = 170;

/// Bytes a table needs with `dedup` versions remembered and windows of up to `window_rows`.
pub fn estimate(dedup: u32, window_rows: u32) -> u64 {
    u64::from(dedup) * DEDUP_BYTES_PER_VERSION + PAGES_HELD * u64::from(window_rows) * ROW_BYTES + BASE_BYTES
}

/// Records an error on the key to lower when `dedup` versions and windows of `window_rows` rows
/// (from `window_key`) cannot fit the host's memory cap, if the configuration carries one.
pub fn check(r: &mut ConfigReader<'_>, dedup: u32, window_rows: u32, window_key: &str) {
    let Some(max) = r.string(MEMORY_KEY).and_then(|v| v.parse::<u64>().ok()) else { return };
    let need = estimate(dedup, window_rows);
    if need <= max {
        return;
    }
    let mb = |b: u64| b / 1_000_000;
    let pages = PAGES_HELD * u64::from(window_rows) * ROW_BYTES;
    let versions = u64::from(dedup) * DEDUP_BYTES_PER_VERSION;
    let what = format!(
        "{dedup} dedup versions and windows of up to {window_rows} rows need about {} MB of the component's memory, \
         over {MEMORY_KEY}={max} ({} MB)",
        mb(need),
        mb(max)
    );
    // Name the setting that takes most of it, with the largest value that would fit.
    if versions >= pages {
        let fits = max.saturating_sub(pages + BASE_BYTES) / DEDUP_BYTES_PER_VERSION;
        r.error("snow.dedup.window.size", format!("{what}: set it to at most {fits}, or raise {MEMORY_KEY}"));
    } else {
        let fits = max.saturating_sub(versions + BASE_BYTES) / (PAGES_HELD * ROW_BYTES);
        r.error(window_key, format!("{what}: set it to at most {fits}, or raise {MEMORY_KEY}"));
    }
}

/// Bytes an attachment of `max` bytes takes while its record is built: the download, its base64
/// (4/3) and the record's value holding both the base64 and the metadata.
pub fn attachment_bytes(max: u32) -> u64 {
    u64::from(max) * 3 + u64::from(max) / 3 * 4
}

/// Records an error on `attachments.max.bytes` when an attachment of that size cannot fit next
/// to the table's dedup window and pages under the host's memory cap.
pub fn check_attachments(r: &mut ConfigReader<'_>, dedup: u32, window_rows: u32, table: &super::TableConfig) {
    let Some(max) = r.string(MEMORY_KEY).and_then(|v| v.parse::<u64>().ok()) else { return };
    let need = estimate(dedup, window_rows) + attachment_bytes(table.attachments_max_bytes);
    if need > max {
        let fits = max.saturating_sub(estimate(dedup, window_rows)) * 3 / 13;
        r.error(
            &format!("snow.table.{}.attachments.max.bytes", table.name),
            format!(
                "an attachment of {} bytes needs about {} MB of the component's memory besides the table's pages and dedup window, \
                 over {MEMORY_KEY}={max}: set it to at most {fits}, or raise {MEMORY_KEY}",
                table.attachments_max_bytes,
                attachment_bytes(table.attachments_max_bytes) / 1_000_000
            ),
        );
    }
}

/// Refuses a snapshot table whose topic holds more keys than the host's memory cap (in
/// `entries`, when the host passes it) leaves room for, after `base` (its pages and the rest).
pub fn check_snapshot_keys(entries: &super::Entries, table: &str, keys: usize, base: u64) -> Result<(), crate::error::SnowError> {
    let Some(max) = entries.get(MEMORY_KEY).and_then(|v| v.parse::<u64>().ok()) else { return Ok(()) };
    let need = keys as u64 * SNAPSHOT_BYTES_PER_KEY + base;
    if need <= max {
        return Ok(());
    }
    let fits = max.saturating_sub(base) / SNAPSHOT_BYTES_PER_KEY;
    Err(crate::error::SnowError::config(
        MEMORY_KEY,
        format!(
            "table {table} is read by snapshots and its topic holds {keys} keys: about {} MB of the component's memory, over \
             {MEMORY_KEY}={max} ({} MB), which holds about {fits} keys; raise it",
            need / 1_000_000,
            max / 1_000_000
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_estimate_adds_up() {
        assert_eq!(DEDUP_BYTES_PER_VERSION, 160, "80 bytes a version, as the docs say");
        assert_eq!(estimate(200_000, 10_000), 200_000 * 160 + 3 * 10_000 * 4096 + (16 << 20));
    }
}
