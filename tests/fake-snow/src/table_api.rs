//! Table API handlers: list, get, create, patch, put, delete, with ServiceNow's answers and
//! error envelopes. Rows are rendered per `sysparm_fields`, `sysparm_display_value` and
//! `sysparm_exclude_reference_link`.

use std::borrow::Cow;
use std::collections::HashMap;
use std::ops::Bound;

use serde_json::{Map, Value, json};

use crate::query::Query;
use crate::served::ServedVersion;
use crate::server::{Answer, Shared};
use crate::store::{INDEXED, Row};
use crate::time::{format_ts, parse_ts};

/// ServiceNow's error envelope.
pub fn envelope(status: u16, message: &str, detail: &str) -> Answer {
    Answer::json(status, &json!({ "error": { "message": message, "detail": detail }, "status": "failure" }))
}

/// API version from the path: `/api/now/table` and `/api/now/v1/table` are v1, `/api/now/v2/table` v2.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// Answers 404 when a valid query matches nothing.
    V1,
    /// Answers 200 with an empty result.
    V2,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Display {
    Raw,
    Shown,
    All,
}

struct Render<'a> {
    fields: Option<Vec<&'a str>>,
    display: Display,
    exclude_links: bool,
    /// The reader's time zone offset in seconds, for display values of date-times.
    offset: i64,
}

impl<'a> Render<'a> {
    /// How write answers render the row: every field, raw values, with links.
    fn raw() -> Self {
        Self { fields: None, display: Display::Raw, exclude_links: false, offset: 0 }
    }

    fn from_params(params: &'a HashMap<String, String>, offset: i64) -> Self {
        let fields = params.get("sysparm_fields").map(|f| f.split(',').map(str::trim).filter(|f| !f.is_empty()).collect());
        let display = match params.get("sysparm_display_value").map(String::as_str) {
            Some("true") => Display::Shown,
            Some("all") => Display::All,
            _ => Display::Raw,
        };
        let exclude_links = params.get("sysparm_exclude_reference_link").is_some_and(|v| v == "true");
        Self { fields, display, exclude_links, offset }
    }

    /// True when rows go out exactly as stored (every field, raw values, links kept).
    fn is_raw_whole_row(&self) -> bool {
        self.fields.is_none() && self.display == Display::Raw && !self.exclude_links
    }

    fn row(&self, row: &Row) -> Value {
        let mut out = Map::new();
        let mut put = |k: &str, v: &Value| {
            out.insert(k.to_string(), self.value(v));
        };
        match &self.fields {
            Some(fields) => {
                for f in fields {
                    if let Some(v) = row.get(*f) {
                        put(f, v);
                    }
                }
            }
            None => {
                for (k, v) in row {
                    put(k, v);
                }
            }
        }
        Value::Object(out)
    }

    fn value(&self, v: &Value) -> Value {
        let (raw, shown, link) = match v {
            Value::Object(o) => (
                o.get("value").cloned().unwrap_or(Value::Null),
                o.get("display_value").cloned().unwrap_or(Value::Null),
                o.get("link").cloned(),
            ),
            other => (other.clone(), other.clone(), None),
        };
        let shown = match shown.as_str().and_then(parse_ts) {
            Some(ts) if self.offset != 0 => Value::String(format_ts(ts + self.offset)),
            _ => shown,
        };
        let link = link.filter(|_| !self.exclude_links);
        match (self.display, link) {
            (Display::Raw, Some(_)) => crate::store::raw_value(v),
            (Display::Raw, None) => raw,
            (Display::Shown, Some(link)) => json!({ "link": link, "display_value": shown }),
            (Display::Shown, None) => shown,
            (Display::All, Some(link)) => json!({ "display_value": shown, "value": raw, "link": link }),
            (Display::All, None) => json!({ "display_value": shown, "value": raw }),
        }
    }
}

fn invalid_table(table: &str) -> Answer {
    envelope(400, &format!("Invalid table {table}"), "")
}

fn not_found() -> Answer {
    envelope(404, "No Record found", "Record doesn't exist or ACL restricts the record retrieval")
}

/// `GET /api/now/table/{table}`.
///
/// Like ServiceNow, the window (`sysparm_limit` rows from `sysparm_offset`) is read first and the
/// rows the table's ACLs hide are dropped from it afterwards, so a window can come back short or
/// empty while readable rows follow. `X-Total-Count` counts the matching rows before ACLs (unless
/// `sysparm_no_count=true`); `Link` offers `first`, `prev` (with a negative offset on the first
/// window, as ServiceNow's does), `next` when rows follow the window, and `last` when counted
/// (unless `sysparm_suppress_pagination_header=true`). With the pagination headers switched off
/// ([`Shared::set_pagination_headers`]) neither is ever sent.
pub fn list(shared: &Shared, table: &str, params: &HashMap<String, String>, version: Version, tz_offset: i64) -> Listed {
    let query = Query::parse(params.get("sysparm_query").map(String::as_str).unwrap_or(""));
    let limit: usize = params.get("sysparm_limit").and_then(|l| l.parse().ok()).unwrap_or(10_000);
    let offset: usize = params.get("sysparm_offset").and_then(|o| o.parse().ok()).unwrap_or(0);
    let render = Render::from_params(params, tz_offset);
    let headers = shared.pagination_headers();
    let want_count = headers && params.get("sysparm_no_count").map(String::as_str) != Some("true");
    let want_link = headers && params.get("sysparm_suppress_pagination_header").map(String::as_str) != Some("true");
    let store = shared.store();
    let Some(t) = store.table(table) else { return Listed::nothing(invalid_table(table), query.dropped) };
    if t.reads_denied() {
        return Listed::nothing(read_denied(table), query.dropped);
    }
    let window_end = offset.saturating_add(limit);
    // How many matching rows to walk: all of them to count, one past the window to know whether
    // rows follow it, else just the window.
    let need = if want_count {
        usize::MAX
    } else if want_link {
        window_end.saturating_add(1)
    } else {
        window_end
    };
    let versions = shared.served.is_on().then(Vec::new);
    let mut window = WindowReader { acl: t.acl(), render: &render, offset, end: window_end, need, matched: 0, rows: Vec::new(), versions };
    if let Some(plan) = query.index_plan(&INDEXED) {
        let index = t.index(&plan.field).expect("planned on an indexed field");
        let lo = plan.from.map_or(Bound::Unbounded, |f| Bound::Included((f, String::new())));
        let hi = plan.to.map_or(Bound::Unbounded, |t| Bound::Included((t, "\u{10FFFF}".to_string())));
        let range = index.range((lo, hi));
        let entries: Box<dyn Iterator<Item = _>> = if plan.descending { Box::new(range.rev()) } else { Box::new(range) };
        for ((_, id), stored) in entries {
            if query.matches(&stored.row) && !window.visit(id, &stored.row, &stored.json) {
                break;
            }
        }
    } else {
        let mut all: Vec<&Row> = t.rows_in_order().filter(|r| query.matches(r)).collect();
        all.sort_by(|a, b| query.compare(a, b));
        for row in all {
            let id = row.get("sys_id").and_then(Value::as_str).unwrap_or("");
            if !window.visit(id, row, t.json(id).unwrap_or("{}")) {
                break;
            }
        }
    }
    let WindowReader { matched, rows, versions, .. } = window;
    let mut pagination = Vec::new();
    if want_count {
        pagination.push(("X-Total-Count".to_string(), matched.to_string()));
    }
    if want_link {
        pagination
            .push(("Link".to_string(), link(&shared.base_url, table, limit, offset, matched > window_end, want_count.then_some(matched))));
    }
    if matched <= offset && version == Version::V1 {
        let mut answer = envelope(404, "No Record found", "Records not found");
        answer.headers.extend(pagination);
        return Listed { versions, ..Listed::nothing(answer, query.dropped) };
    }
    let returned = rows.len();
    let mut body = Vec::with_capacity(rows.iter().map(|r| r.len() + 1).sum::<usize>() + 12);
    body.extend_from_slice(b"{\"result\":[");
    for (i, r) in rows.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(r.as_bytes());
    }
    body.extend_from_slice(b"]}");
    drop(rows);
    drop(store);
    let mut answer = Answer { status: 200, headers: vec![("Content-Type".into(), "application/json;charset=UTF-8".into())], body };
    answer.headers.extend(pagination);
    Listed { answer, dropped: query.dropped, returned, versions }
}

/// A list answer and what the journal and the served-versions log keep of it.
pub struct Listed {
    /// The answer.
    pub answer: Answer,
    /// Encoded-query terms ServiceNow would have dropped silently.
    pub dropped: Vec<String>,
    /// Rows the answer holds.
    pub returned: usize,
    /// Their versions, when the served-versions log is on.
    pub versions: Option<Vec<ServedVersion>>,
}

impl Listed {
    fn nothing(answer: Answer, dropped: Vec<String>) -> Self {
        Self { answer, dropped, returned: 0, versions: None }
    }
}

/// Walks the rows a query matches, in its order, keeping the readable rows of the window.
struct WindowReader<'a> {
    acl: &'a crate::store::Acl,
    render: &'a Render<'a>,
    offset: usize,
    end: usize,
    /// How many matching rows to walk before stopping.
    need: usize,
    matched: usize,
    rows: Vec<Cow<'a, str>>,
    /// The kept rows' versions, when the served-versions log is on.
    versions: Option<Vec<ServedVersion>>,
}

impl<'a> WindowReader<'a> {
    /// Takes the next matching row; false once enough rows were walked.
    fn visit(&mut self, id: &str, row: &'a Row, json: &'a str) -> bool {
        if (self.offset..self.end).contains(&self.matched) && !self.acl.hides(id, row) {
            self.rows.push(if self.render.is_raw_whole_row() { Cow::Borrowed(json) } else { Cow::Owned(self.render.row(row).to_string()) });
            if let Some(versions) = self.versions.as_mut() {
                let text = |k: &str| row.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
                versions.push(ServedVersion { ts: text("sys_updated_on"), sys_id: id.to_string(), mod_count: text("sys_mod_count") });
            }
        }
        self.matched += 1;
        self.matched < self.need
    }
}

/// ServiceNow's `Link` header for a window: `first`, `prev` (negative on the first window, as the
/// instance sends it), `next` when rows follow, `last` when the rows were counted.
fn link(base: &str, table: &str, limit: usize, offset: usize, more: bool, total: Option<usize>) -> String {
    let url = |at: i64| format!("<{base}/api/now/table/{table}?sysparm_limit={limit}&sysparm_offset={at}>");
    let (limit_i, offset_i) = (limit as i64, offset as i64);
    let mut links = vec![format!("{};rel=\"first\"", url(0)), format!("{};rel=\"prev\"", url(offset_i - limit_i))];
    if more {
        links.push(format!("{};rel=\"next\"", url(offset_i + limit_i)));
    }
    if let Some(total) = total {
        let last = if total == 0 || limit == 0 { 0 } else { ((total - 1) / limit * limit) as i64 };
        links.push(format!("{};rel=\"last\"", url(last)));
    }
    links.join(",")
}

/// What a table-level read ACL the user fails answers (the shape of an instance's ACL refusal).
fn read_denied(table: &str) -> Answer {
    envelope(403, "User Not Authorized", &format!("Read ACL failure on table {table}: the user's roles do not grant read"))
}

/// `GET /api/now/table/{table}/{sys_id}`.
pub fn get(shared: &Shared, table: &str, id: &str, params: &HashMap<String, String>, tz_offset: i64) -> Answer {
    let render = Render::from_params(params, tz_offset);
    let store = shared.store();
    let Some(t) = store.table(table) else { return invalid_table(table) };
    if t.reads_denied() {
        return read_denied(table);
    }
    match t.get(id) {
        Some(row) if !t.acl().hides(id, row) => Answer::json(200, &json!({ "result": render.row(row) })),
        _ => not_found(),
    }
}

fn body_object(body: &[u8]) -> Result<Row, Answer> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(envelope(400, "Exception while reading request", "The payload is not valid JSON.")),
    }
}

/// `POST /api/now/table/{table}`.
pub fn create(shared: &Shared, table: &str, body: &[u8], user: &str) -> Answer {
    let row = match body_object(body) {
        Ok(row) => row,
        Err(answer) => return answer,
    };
    let now = shared.clock.now();
    let mut store = shared.store();
    if store.table(table).is_none() {
        return invalid_table(table);
    }
    let named = row.get("sys_id").and_then(Value::as_str).filter(|id| !id.is_empty()).map(str::to_string);
    if let (Some(status), Some(id)) = (shared.duplicate_insert_status(), named)
        && store.table(table).is_some_and(|t| t.get(&id).is_some())
    {
        return envelope(status, "Operation Failed", &format!("A record with sys_id {id} already exists in {table}"));
    }
    let row = store.insert(table, row, now, user);
    let id = row.get("sys_id").and_then(Value::as_str).unwrap_or("").to_string();
    let mut answer = Answer::json(201, &json!({ "result": Render::raw().row(&row) }));
    answer.headers.push(("Location".into(), format!("{}/api/now/table/{table}/{id}", shared.base_url)));
    answer
}

/// `PATCH` (partial) or `PUT` (full) `/api/now/table/{table}/{sys_id}`.
pub fn update(shared: &Shared, table: &str, id: &str, body: &[u8], user: &str, replace: bool) -> Answer {
    let changes = match body_object(body) {
        Ok(row) => row,
        Err(answer) => return answer,
    };
    let now = shared.clock.now();
    let mut store = shared.store();
    if store.table(table).is_none() {
        return invalid_table(table);
    }
    match store.update(table, id, changes, now, user, replace) {
        Some(row) => Answer::json(200, &json!({ "result": Render::raw().row(&row) })),
        None => not_found(),
    }
}

/// `DELETE /api/now/table/{table}/{sys_id}`.
pub fn delete(shared: &Shared, table: &str, id: &str, user: &str) -> Answer {
    let now = shared.clock.now();
    let mut store = shared.store();
    if store.table(table).is_none() {
        return invalid_table(table);
    }
    match store.delete(table, id, now, user) {
        Some(_) => Answer { status: 204, headers: Vec::new(), body: Vec::new() },
        None => not_found(),
    }
}
