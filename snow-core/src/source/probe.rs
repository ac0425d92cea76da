//! The startup probe: one one-row read of a table before any data moves, so that a refused
//! credential, a missing read ACL, a wrong table name, a missing cursor field or a non-UTC
//! integration user stops the table with an error that says what to fix.

use crate::clock::Clock;
use crate::config::TableConfig;
use crate::config::source::TableMode;
use crate::error::{ErrorClass, HttpFailure, SnowError};
use crate::http::Transport;
use crate::table::{DisplayValue, ListParams, TableClient};

/// Reads the newest row of `table` with display values and checks it (a table read by snapshots:
/// its first row by id, and only its id field).
pub fn probe<T: Transport, C: Clock>(client: &mut TableClient<T, C>, table: &TableConfig) -> Result<(), SnowError> {
    let snapshot = table.mode == TableMode::Snapshot;
    let order = if snapshot { format!("ORDERBY{}", table.sys_id_field) } else { format!("ORDERBYDESC{}", table.timestamp_field) };
    let query = table.query.with_cursor(&[], &[]);
    let query = if query.is_empty() { order } else { format!("{query}^{order}") };
    let fields = if snapshot { vec![table.sys_id_field.clone()] } else { vec![table.sys_id_field.clone(), table.timestamp_field.clone()] };
    let params = ListParams {
        query: &query,
        fields: Some(&fields),
        limit: 1,
        offset: 0,
        count: false,
        display_value: DisplayValue::All,
        exclude_reference_link: true,
        no_domain: table.query_domain == crate::config::source::QueryDomain::All,
        category: table.query_category.as_deref(),
    };
    let page = client.list(&table.name, &params).map_err(|e| explain(e, table))?;
    let row: Option<serde_json::Map<String, serde_json::Value>> = serde_json::from_slice::<serde_json::Value>(&page.body)
        .ok()
        .and_then(|v| v.get("result")?.as_array()?.first()?.as_object().cloned());
    let Some(row) = row else { return Ok(()) };
    if !row.contains_key(&table.sys_id_field) {
        return Err(SnowError::config(
            format!("snow.table.{}.sys.id.field", table.name),
            format!(
                "table {} has no readable field {} (ServiceNow ignores unknown fields silently): check the name, or the user's read \
                 access to it (a database view names its id field with the view's prefix, e.g. inc_sys_id)",
                table.name, table.sys_id_field
            ),
        ));
    }
    if snapshot {
        return Ok(());
    }
    if !row.contains_key(&table.timestamp_field) {
        return Err(SnowError::config(
            format!("snow.table.{}.timestamp.field", table.name),
            format!(
                "table {} has no readable field {} (ServiceNow ignores unknown fields silently): check the name or the user's read \
                 access to it; a table or database view without a maintained timestamp is read by snapshots instead: \
                 snow.table.{}.mode=snapshot",
                table.name, table.timestamp_field, table.name
            ),
        ));
    }
    let stamp = |v: &serde_json::Value| v.as_str().or_else(|| v.get("value")?.as_str()).map(str::to_string);
    if row.get(&table.timestamp_field).and_then(stamp).is_some_and(|s| s.is_empty()) {
        return Err(SnowError::config(
            format!("snow.table.{}.timestamp.field", table.name),
            format!(
                "table {}: its newest row by {} has no {} (the field is not maintained, e.g. rows written by an import that \
                 bypasses system fields): a cursor would never read those rows. Read it by snapshots \
                 (snow.table.{}.mode=snapshot) or name a maintained timestamp field",
                table.name, table.timestamp_field, table.timestamp_field, table.name
            ),
        ));
    }
    if let Some(ts) = row.get(&table.timestamp_field).and_then(|v| v.as_object()) {
        let value = ts.get("value").and_then(|v| v.as_str()).unwrap_or("");
        let shown = ts.get("display_value").and_then(|v| v.as_str()).unwrap_or("");
        if let (Some(utc), Some(local)) = (clock_time(value), clock_time(shown))
            && utc != local
        {
            return Err(SnowError::config(
                "snow.auth.username",
                format!(
                    "the integration user's time zone is not UTC: table {} field {} shows {shown:?} for the UTC value {value:?}. \
                     Encoded-query dates are read in the user's time zone, so the cursor would skip or repeat rows. \
                     Set the user's time zone to UTC (sys_user.time_zone)",
                    table.name, table.timestamp_field
                ),
            ));
        }
    }
    Ok(())
}

/// Adds what to check to the probe's HTTP failures.
fn explain(error: SnowError, table: &TableConfig) -> SnowError {
    let SnowError::Http(h) = error else { return error };
    let advice = match h.status {
        401 => "ServiceNow refused the integration user's login (check snow.auth.*: user, password, OAuth client)".to_string(),
        403 => {
            format!("the integration user may not read table {} (an ACL refused it): grant it a role that can read the table", table.name)
        }
        404 => format!("the Table API answered 404 for table {}: check snow.instance.url and that the table exists", table.name),
        400 => format!("ServiceNow rejected the read of table {}: check the table name and snow.table.{}.query", table.name, table.name),
        _ => return SnowError::Http(h),
    };
    SnowError::Http(HttpFailure { message: format!("startup probe: {advice} ({})", h.message), class: ErrorClass::Fatal, ..h })
}

/// Hours and minutes of the first `H:MM` or `HH:MM` in `text`, with `AM`/`PM` applied.
fn clock_time(text: &str) -> Option<(u32, u32)> {
    let b = text.as_bytes();
    let colon = (1..b.len().saturating_sub(2))
        .find(|&i| b[i] == b':' && b[i - 1].is_ascii_digit() && b[i + 1].is_ascii_digit() && b[i + 2].is_ascii_digit())?;
    let start = if colon >= 2 && b[colon - 2].is_ascii_digit() { colon - 2 } else { colon - 1 };
    let hours: u32 = text[start..colon].parse().ok()?;
    let minutes: u32 = text[colon + 1..colon + 3].parse().ok()?;
    let upper = text.to_ascii_uppercase();
    let hours = match (upper.contains("PM"), upper.contains("AM")) {
        (true, _) if hours < 12 => hours + 12,
        (_, true) if hours == 12 => 0,
        _ => hours,
    };
    Some((hours, minutes))
}

#[cfg(test)]
mod tests {
    use super::clock_time;

    #[test]
    fn clock_times_in_the_usual_display_formats() {
        assert_eq!(clock_time("2024-01-31 13:05:09"), Some((13, 5)));
        assert_eq!(clock_time("31/01/2024 13:05:09"), Some((13, 5)));
        assert_eq!(clock_time("01-31-2024 01:05:09 PM"), Some((13, 5)));
        assert_eq!(clock_time("01-31-2024 12:05 AM"), Some((0, 5)));
        assert_eq!(clock_time("2024-01-31 9:05"), Some((9, 5)));
        assert_eq!(clock_time("no time"), None);
    }
}
