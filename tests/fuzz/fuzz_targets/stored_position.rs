//! What a host hands a source component back: a stored position of any version (a cursor, a
//! parallel backfill's slices, a snapshot table's, ADR 0033 and 0035) and a snapshot table's
//! read-back of its topic. Any text is read or refused with a reason, never a panic, and what is
//! read is written back to the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use snow_core::cursor::position::{Position, snapshot_position};
use snow_core::source::snapshot::{parse_seed, seed_text};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    match Position::parse(&text) {
        Ok(Position::Cursor(cursor, seen)) => {
            let again = cursor.to_position_with(&seen);
            assert_eq!(Position::parse(&again), Ok(Position::Cursor(cursor, seen)));
        }
        Ok(Position::Backfill(backfill)) => {
            assert_eq!(Position::parse(&backfill.to_position()), Ok(Position::Backfill(backfill)));
        }
        Ok(Position::Snapshot(finished)) => {
            assert_eq!(Position::parse(&snapshot_position(finished)), Ok(Position::Snapshot(finished)));
        }
        Err(reason) => assert!(!reason.is_empty()),
    }
    if let Ok(rows) = parse_seed(&text) {
        let again = seed_text(rows.iter().copied());
        assert_eq!(parse_seed(&again), Ok(rows));
    }
});
