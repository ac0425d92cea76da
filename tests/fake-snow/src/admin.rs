//! The admin API under `/__fake/`, for tests in any language and for the demo. Every endpoint
//! answers JSON; the same operations are methods on [`crate::FakeSnow`] and [`crate::server::Shared`].
//!
//! | call | body | effect |
//! |---|---|---|
//! | `GET /__fake/health` | | `{"ok":true}` |
//! | `PUT /__fake/tables/{t}` | | create an empty table |
//! | `PUT /__fake/views/{t}` | | create an empty database view: its rows carry no `sys_created_on`, `sys_updated_on`, `sys_mod_count` or `sys_*_by`, and writes (rows, update, the Table API) stamp none (a table read by snapshots) |
//! | `POST /__fake/tables/{t}/seed` | `{"count":N,"at":"ts"}` or `{"count":N,"start":"ts","spread_seconds":S}` | incident-shaped rows; without `at`/`start`, spread over the hour before now |
//! | `POST /__fake/tables/{t}/rows` | `[{...}, ...]` | insert rows as given, system fields filled in at the clock's time |
//! | `POST /__fake/tables/{t}/attachments` | `{"table_sys_id":..,"file_name":..,"content_type":..,"content_base64":..}` or `{..,"size":N}` | attach a file to a row: a `sys_attachment` row (size, SHA-256 `hash`) and its content at `/api/now/attachment/{sys_id}/file` |
//! | `POST /__fake/tables/{t}/update` | `{"sys_ids":[...],"changes":{...}}` | update rows at the clock's time |
//! | `POST /__fake/tables/{t}/hidden` | `{"sys_ids":[...]}` and/or `{"query":"encoded query"}` | hide rows from the API's users (a row-level read ACL: the window is read first, hidden rows dropped after) |
//! | `DELETE /__fake/tables/{t}/hidden` | | every row readable again |
//! | `PUT /__fake/tables/{t}/dictionary` | `{"fields":[...],"parent":"task"}` | the table's own fields (`sys_dictionary` rows: a name, or `{"element","internal_type","reference","choice","attributes"}`), replacing any set before (a column added then is there, empty, on every existing row), and the table it extends (`sys_db_object.super_class`); writes then drop unknown fields silently, as ServiceNow does |
//! | `POST /__fake/settings` | `{"pagination_headers":false}` | never send `X-Total-Count` or `Link` (an instance or proxy that strips them) |
//! | `POST /__fake/settings` | `{"latency":{"request_ms":40,"write_ms":10,"batch_quota_ms":30000}}`, `{"rate_limit":{"requests":500,"window_ms":3600000,"headers":false}}` (see [`crate::rate_limit`]) | as slow as an instance: every request waits `request_ms`, every executed write `write_ms` more (a batch's items one after another); a batch leaves items unserviced past its quota |
//! | `POST /__fake/settings` | `{"batch_api":false}` | `POST /api/now/v1/batch` answers 400, as an instance without the Batch API |
//! | `GET /__fake/tables/{t}` | | `{"count":N,"rows":[...]}` |
//! | `GET /__fake/tables/{t}/count` | | `{"count":N,"readable":M}` (M: rows no ACL hides) |
//! | `GET /__fake/clock` | | `{"now":"ts","frozen":bool}` |
//! | `POST /__fake/clock` | `{"set":"ts"}` / `{"advance_seconds":n}` / `{"follow":true}` | move the clock |
//! | `POST /__fake/faults` | a fault rule (see [`crate::faults`]) | inject a fault |
//! | `DELETE /__fake/faults` | | remove all faults |
//! | `GET /__fake/journal` / `DELETE /__fake/journal` | | read / reset the request journal |
//! | `POST /__fake/users` | `{"username":..,"password":..,"time_zone_offset_seconds":n}` | add a Basic user (display values in its time zone) |
//! | `POST /__fake/oauth/clients` | `{"client_id":..,"client_secret":..,"access_ttl_seconds":n}` | add an OAuth client |
//! | `POST /__fake/oauth/expire` | | every access token expires now (refresh tokens stay valid) |
//! | `POST /__fake/oauth/revoke_refresh` | | every refresh token becomes invalid |
//! | `GET /__fake/oauth/tokens` | | every token issued so far (for leak checks) |
//! | `POST /__fake/push` | `{"url":..,"secret":..,"delay_ms":n,"loss":0.2,"duplicate":0.1,"tables":[..]}` | run the after-commit business rule ([`crate::push`]): a signed notification posted after each committed write |
//! | `GET /__fake/push` / `DELETE /__fake/push` | | the rule's counts (`writes`, `lost`, `posted`, `failed`) / switch it off |

use serde::Deserialize;
use serde_json::{Value, json};

use crate::faults::Fault;
use crate::server::{Answer, Shared};
use crate::store::Row;
use crate::time::{format_ts, parse_ts};

fn bad(message: impl Into<String>) -> Answer {
    Answer::json(400, &json!({ "error": message.into() }))
}

fn ok(value: Value) -> Answer {
    Answer::json(200, &value)
}

fn ts(text: &str) -> Result<i64, Answer> {
    parse_ts(text).ok_or_else(|| bad(format!("{text:?} is not YYYY-MM-DD HH:MM:SS")))
}

#[derive(Deserialize)]
struct Seed {
    count: u64,
    at: Option<String>,
    start: Option<String>,
    #[serde(default)]
    spread_seconds: u64,
}

#[derive(Deserialize)]
struct Attach {
    table_sys_id: String,
    file_name: String,
    #[serde(default = "octet_stream")]
    content_type: String,
    /// The content, base64; or `size` bytes of a repeated pattern.
    #[serde(default)]
    content_base64: Option<String>,
    #[serde(default)]
    size: usize,
}

fn octet_stream() -> String {
    "application/octet-stream".into()
}

#[derive(Deserialize)]
struct Update {
    sys_ids: Vec<String>,
    changes: Row,
}

#[derive(Deserialize)]
struct Hide {
    #[serde(default)]
    sys_ids: Vec<String>,
    query: Option<String>,
}

#[derive(Deserialize)]
struct Settings {
    pagination_headers: Option<bool>,
    latency: Option<crate::server::Latency>,
    batch_api: Option<bool>,
    /// A rate limit rule; `null` removes it (absent: unchanged).
    #[serde(default, deserialize_with = "present")]
    rate_limit: Option<Option<crate::rate_limit::RateLimit>>,
}

/// A key that is present (even `null`) is `Some`.
fn present<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

#[derive(Deserialize)]
struct Dictionary {
    fields: Vec<crate::store::DictField>,
    parent: Option<String>,
}

#[derive(Deserialize)]
struct ClockChange {
    set: Option<String>,
    advance_seconds: Option<i64>,
    #[serde(default)]
    follow: bool,
}

#[derive(Deserialize)]
struct User {
    username: String,
    password: String,
    time_zone_offset_seconds: Option<i64>,
}

#[derive(Deserialize)]
struct Rule {
    url: String,
    secret: String,
    #[serde(default)]
    delay_ms: u64,
    #[serde(default)]
    loss: f64,
    #[serde(default)]
    duplicate: f64,
    #[serde(default)]
    tables: Vec<String>,
}

#[derive(Deserialize)]
struct Client {
    client_id: String,
    client_secret: String,
    access_ttl_seconds: Option<i64>,
}

fn parse<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Result<T, Answer> {
    serde_json::from_slice(body).map_err(|e| bad(format!("bad request body: {e}")))
}

/// Handles one admin request.
pub async fn route(shared: &Shared, method: &str, path: &str, body: &[u8]) -> Answer {
    match try_route(shared, method, path, body) {
        Ok(answer) | Err(answer) => answer,
    }
}

fn try_route(shared: &Shared, method: &str, path: &str, body: &[u8]) -> Result<Answer, Answer> {
    let rest = path.trim_start_matches("/__fake/");
    let parts: Vec<&str> = rest.split('/').collect();
    Ok(match (method, parts.as_slice()) {
        ("GET", ["health"]) => ok(json!({ "ok": true })),
        ("PUT", ["tables", t]) => {
            shared.store().create_table(t);
            ok(json!({ "table": t }))
        }
        ("PUT", ["views", t]) => {
            shared.store().create_view(t);
            ok(json!({ "view": t }))
        }
        ("POST", ["tables", t, "seed"]) => {
            let seed: Seed = parse(body)?;
            let (start, spread) = match (&seed.at, &seed.start) {
                (Some(at), _) => (ts(at)?, 0),
                (None, Some(start)) => (ts(start)?, seed.spread_seconds),
                (None, None) => (shared.clock.now() - 3600, 3599),
            };
            let ids = shared.seed(t, seed.count, start, spread);
            let listed = if ids.len() <= 10_000 { json!(ids) } else { Value::Null };
            ok(json!({ "count": ids.len(), "first_sys_id": ids.first(), "last_sys_id": ids.last(), "sys_ids": listed }))
        }
        ("POST", ["tables", t, "rows"]) => {
            let rows: Vec<Row> = parse(body)?;
            let now = shared.clock.now();
            let mut store = shared.store();
            store.create_table(t);
            let ids: Vec<Value> =
                rows.into_iter().map(|r| store.insert(t, r, now, "admin").get("sys_id").cloned().unwrap_or(Value::Null)).collect();
            ok(json!({ "sys_ids": ids }))
        }
        ("POST", ["tables", t, "attachments"]) => {
            use base64::Engine;
            let a: Attach = parse(body)?;
            let content = match &a.content_base64 {
                Some(b) => base64::engine::general_purpose::STANDARD
                    .decode(b)
                    .map_err(|e| Answer::json(400, &json!({ "error": format!("content_base64: {e}") })))?,
                None => (0..a.size).map(|i| (i % 251) as u8).collect(),
            };
            let now = shared.clock.now();
            let file =
                crate::attachment::File { table: t, row: &a.table_sys_id, name: &a.file_name, content_type: &a.content_type, content };
            let id = shared.store().attach(file, now, "admin");
            ok(json!({ "sys_id": id }))
        }
        ("POST", ["tables", t, "update"]) => {
            let update: Update = parse(body)?;
            ok(json!({ "updated": shared.update_rows(t, &update.sys_ids, &update.changes) }))
        }
        ("POST", ["tables", t, "hidden"]) => {
            let hide: Hide = parse(body)?;
            let hidden = hide.sys_ids.len();
            let found = shared.hide_rows(t, hide.sys_ids) && hide.query.as_deref().is_none_or(|q| shared.hide_matching(t, q));
            if !found {
                return Err(Answer::json(404, &json!({ "error": format!("no table {t}") })));
            }
            ok(json!({ "hidden_sys_ids": hidden, "query": hide.query }))
        }
        ("DELETE", ["tables", t, "hidden"]) => {
            shared.store().table_mut(t).ok_or_else(|| Answer::json(404, &json!({ "error": format!("no table {t}") })))?.show_all();
            ok(json!({ "ok": true }))
        }
        ("PUT", ["tables", t, "dictionary"]) => {
            let dictionary: Dictionary = parse(body)?;
            let now = shared.clock.now();
            shared.store().set_dictionary(t, &dictionary.fields, dictionary.parent.as_deref(), now);
            ok(json!({ "table": t, "fields": dictionary.fields.len() }))
        }
        ("POST", ["settings"]) => {
            let settings: Settings = parse(body)?;
            if let Some(on) = settings.pagination_headers {
                shared.set_pagination_headers(on);
            }
            if let Some(latency) = settings.latency {
                shared.set_latency(latency);
            }
            if let Some(on) = settings.batch_api {
                shared.set_batch_api(on);
            }
            if let Some(rule) = settings.rate_limit {
                shared.set_rate_limit(rule);
            }
            ok(json!({
                "pagination_headers": shared.pagination_headers(),
                "latency": shared.latency(),
                "batch_api": shared.batch_api(),
                "rate_limit": shared.rate_limit(),
            }))
        }
        ("GET", ["tables", t]) => {
            let store = shared.store();
            let table = store.table(t).ok_or_else(|| Answer::json(404, &json!({ "error": format!("no table {t}") })))?;
            let rows: Vec<&Row> = table.rows_in_order().collect();
            ok(json!({ "count": rows.len(), "rows": rows }))
        }
        ("GET", ["tables", t, "count"]) => {
            let store = shared.store();
            let (count, readable) = store.table(t).map_or((0, 0), |t| {
                let readable =
                    t.rows_in_order().filter(|r| !t.acl().hides(r.get("sys_id").and_then(Value::as_str).unwrap_or(""), r)).count();
                (t.len(), readable)
            });
            ok(json!({ "count": count, "readable": readable }))
        }
        ("GET", ["clock"]) => ok(json!({ "now": format_ts(shared.clock.now()), "frozen": shared.clock.is_frozen() })),
        ("POST", ["clock"]) => {
            let change: ClockChange = parse(body)?;
            if let Some(set) = &change.set {
                shared.clock.freeze_at(ts(set)?);
            }
            if let Some(seconds) = change.advance_seconds {
                shared.clock.advance(seconds);
            }
            if change.follow {
                shared.clock.follow();
            }
            ok(json!({ "now": format_ts(shared.clock.now()), "frozen": shared.clock.is_frozen() }))
        }
        ("POST", ["faults"]) => {
            let fault: Fault = parse(body)?;
            shared.faults.lock().unwrap_or_else(|e| e.into_inner()).add(fault);
            ok(json!({ "ok": true }))
        }
        ("DELETE", ["faults"]) => {
            shared.faults.lock().unwrap_or_else(|e| e.into_inner()).clear();
            ok(json!({ "ok": true }))
        }
        ("GET", ["journal"]) => Answer::json(200, &shared.journal.snapshot()),
        ("DELETE", ["journal"]) => {
            shared.journal.reset();
            ok(json!({ "ok": true }))
        }
        ("POST", ["users"]) => {
            let user: User = parse(body)?;
            let mut credentials = shared.credentials.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(offset) = user.time_zone_offset_seconds {
                credentials.time_zones.insert(user.username.clone(), offset);
            }
            credentials.users.insert(user.username, user.password);
            ok(json!({ "ok": true }))
        }
        ("POST", ["oauth", "clients"]) => {
            let client: Client = parse(body)?;
            let mut credentials = shared.credentials.lock().unwrap_or_else(|e| e.into_inner());
            credentials.clients.insert(client.client_id, client.client_secret);
            if client.access_ttl_seconds.is_some() {
                credentials.access_ttl = client.access_ttl_seconds;
            }
            ok(json!({ "ok": true }))
        }
        ("POST", ["oauth", "expire"]) => {
            shared.credentials.lock().unwrap_or_else(|e| e.into_inner()).expire_access_tokens();
            ok(json!({ "ok": true }))
        }
        ("POST", ["oauth", "revoke_refresh"]) => {
            shared.credentials.lock().unwrap_or_else(|e| e.into_inner()).revoke_refresh_tokens();
            ok(json!({ "ok": true }))
        }
        ("GET", ["oauth", "tokens"]) => ok(json!({ "issued": shared.credentials.lock().unwrap_or_else(|e| e.into_inner()).issued() })),
        ("POST", ["push"]) => {
            let r: Rule = parse(body)?;
            let rule = crate::push::PushRule {
                url: r.url,
                secret: r.secret.into_bytes(),
                delay_ms: r.delay_ms,
                loss: r.loss,
                duplicate: r.duplicate,
                tables: r.tables,
            };
            shared.set_push_rule(Some(rule));
            ok(json!({ "push": true }))
        }
        ("GET", ["push"]) => {
            let counts = shared.store().pusher().map(|p| p.counts()).unwrap_or_default();
            ok(json!({ "writes": counts.writes, "lost": counts.lost, "posted": counts.posted, "failed": counts.failed }))
        }
        ("DELETE", ["push"]) => {
            shared.set_push_rule(None);
            ok(json!({ "push": false }))
        }
        _ => Answer::json(404, &json!({ "error": format!("no admin endpoint {method} {path}") })),
    })
}
