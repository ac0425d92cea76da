//! `snow-connect migrate verify`: the runbook's check after a cutover, on a real instance. For
//! each table of our connector it lists the rows the instance holds now whose timestamp lies in
//! `[from, until]` (keyset paging: `ts=s^id>x` within a second, `ts>s` across seconds, the base
//! query applied), reads the table's topic from `from` on, and answers:
//!
//! * **missing** — a row whose current version is in no record of the topic: a loss, the exit
//!   code says so;
//! * **duplicates** — versions the topic holds more than once, split by who wrote them: the old
//!   connector and ours (the cutover's cost, to hold against the bound `cutover` printed), ours
//!   twice, the old connector twice (its own `>=` re-reads).
//!
//! Records are told apart by our headers (`snow.instance`): the old connector wrote none.
//! Versions that lived and were replaced before anyone read them cannot be checked against the
//! instance (it keeps only the current one); the cutover test's evidence covers those.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::Result;
use snow_core::clock::SystemClock;
use snow_core::config::{SourceConfig, TableConfig};
use snow_core::http::{Request, Response, Transport, TransportError, TransportErrorKind};
use snow_core::table::{ListParams, Op, TableClient, Term};
use snow_core::time::Timestamp;

use snow_runtime::auth::Credentials;
use snow_runtime::config::ConnectorSpec;
use snow_runtime::kafka::tools::Connection;

/// Rows per Table API page.
const PAGE: u32 = 1000;

/// The Table API natively: snow-core's requests sent on the host's pool with the connector's
/// credentials (Basic, or OAuth tokens fetched as the gate fetches them).
struct NativeTransport {
    runtime: tokio::runtime::Handle,
    credentials: Credentials,
}

impl Transport for NativeTransport {
    fn send(&mut self, request: &Request) -> Result<Response, TransportError> {
        self.runtime.block_on(async {
            let mut request = request.clone();
            let authorization = self
                .credentials
                .authorization()
                .await
                .map_err(|e| TransportError::new(TransportErrorKind::Connect, format!("credentials: {e}")))?;
            if let Some(a) = authorization {
                request.headers.push(("authorization".into(), a.value.to_str().unwrap_or_default().to_string()));
            }
            snow_runtime::transport::plain::send(&request, &snow_runtime::transport::Route::default()).await
        })
    }
}

/// What verify found for one table.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct TableCheck {
    /// The table.
    pub table: String,
    /// Its topic.
    pub topic: String,
    /// The window checked.
    pub from: String,
    /// See `from`.
    pub until: String,
    /// Rows the instance holds now with a timestamp in the window.
    pub rows: u64,
    /// Of those, the ones whose current version is in no record (sys_id, timestamp, mod count).
    pub missing: Vec<(String, String, String)>,
    /// Records of the topic read (from the window's start).
    pub records: u64,
    /// Versions written by both the old connector and ours.
    pub duplicates_old_and_ours: u64,
    /// Versions ours wrote more than once.
    pub duplicates_ours: u64,
    /// Versions the old connector wrote more than once.
    pub duplicates_old: u64,
}

/// The current `(sys_id, timestamp, mod count)` of every row of `table` in `[from, until]`.
fn instance_rows<T: Transport>(
    client: &mut TableClient<T, SystemClock>,
    table: &TableConfig,
    from: Timestamp,
    until: Timestamp,
) -> Result<Vec<(String, Timestamp, String)>> {
    let (ts_field, id_field) = (table.timestamp_field.as_str(), table.sys_id_field.as_str());
    let fields = vec![id_field.to_string(), ts_field.to_string(), "sys_mod_count".to_string()];
    let term = |f: &str, op: Op, v: String| Term::new(f, op, &v).map_err(anyhow::Error::msg);
    let mut rows = Vec::new();
    let page = |client: &mut TableClient<T, SystemClock>, terms: &[Term], order: &[&str]| -> Result<Vec<(String, Timestamp, String)>> {
        let query = table.query.with_cursor(terms, order);
        let answer =
            client.list(&table.name, &ListParams::lookup(&query, &fields, PAGE)).map_err(|e| anyhow::anyhow!("{}: {e}", table.name))?;
        let parsed = snow_core::table::parse_page(&answer.body, id_field, ts_field).map_err(anyhow::Error::msg)?;
        Ok(parsed
            .into_iter()
            .filter_map(|r| {
                let ts = Timestamp::parse(r.timestamp.as_deref()?).ok()?;
                Some((r.id?.into_owned(), ts, r.mod_count.map(|m| m.into_owned()).unwrap_or_default()))
            })
            .collect())
    };
    // The first second from its start, then second after second: complete seconds from a page
    // across seconds, the last (possibly cut) second drained by id.
    let mut second = from;
    let mut after_id = String::new();
    let mut draining = true;
    loop {
        if draining {
            let mut terms = vec![term(ts_field, Op::Eq, second.to_string())?];
            if !after_id.is_empty() {
                terms.push(term(id_field, Op::Gt, after_id.clone())?);
            }
            let got = page(client, &terms, &[id_field])?;
            after_id = got.last().map(|r| r.0.clone()).unwrap_or(after_id);
            let full = got.len() as u32 == PAGE;
            rows.extend(got);
            if full {
                continue;
            }
            draining = false;
            continue;
        }
        let terms = [term(ts_field, Op::Gt, second.to_string())?, term(ts_field, Op::Le, until.to_string())?];
        let got = page(client, &terms, &[ts_field, id_field])?;
        let Some(last) = got.last().map(|r| r.1) else { break };
        let full = got.len() as u32 == PAGE;
        if !full {
            rows.extend(got);
            break;
        }
        // Seconds before the page's last one are complete; the last one is drained by id.
        rows.extend(got.into_iter().filter(|r| r.1 < last));
        second = last;
        after_id.clear();
        draining = true;
    }
    Ok(rows)
}

/// Checks every table of `spec` over `[from, until]`.
pub fn verify(
    connection: &Connection,
    spec: &ConnectorSpec,
    from: Timestamp,
    until: Timestamp,
    timeout: Duration,
) -> Result<Vec<TableCheck>> {
    let config = SourceConfig::parse(&spec.guest_config).map_err(|e| anyhow::anyhow!("connector {}: {e}", spec.name))?;
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()?;
    let credentials = Credentials::from_spec(&spec.auth, &snow_runtime::auth::tokens::TokenRegistry::default())?;
    let transport = NativeTransport { runtime: runtime.handle().clone(), credentials };
    let mut client = TableClient::new(&config.instance, transport, SystemClock::default());
    let converters = snow_runtime::convert::sink::SinkConverters::new(spec.convert.clone(), None);
    let mut checks = Vec::new();
    for table in &config.tables {
        let current = instance_rows(&mut client, table, from, until)?;
        let tail = runtime.block_on(super::topic_versions::read(connection, &converters, &table.topic, table, from, 300, timeout))?;
        let records = tail.records;
        let mut written: BTreeMap<(Timestamp, String, String), (u64, u64)> = BTreeMap::new();
        for w in tail.written {
            let entry = written.entry((w.version.ts, w.version.id, w.version.mod_count)).or_default();
            if w.ours { entry.1 += 1 } else { entry.0 += 1 }
        }
        let in_topic: BTreeSet<(&Timestamp, &String, &String)> = written.keys().map(|(t, i, m)| (t, i, m)).collect();
        let missing = current
            .iter()
            .filter(|(id, ts, m)| !in_topic.contains(&(ts, id, m)))
            .map(|(id, ts, m)| (id.clone(), ts.to_string(), m.clone()))
            .collect();
        let in_window = written.iter().filter(|((ts, _, _), _)| *ts >= from);
        let (mut both, mut ours_twice, mut old_twice) = (0, 0, 0);
        for (_, (old, ours)) in in_window {
            both += u64::from(*old > 0 && *ours > 0);
            ours_twice += ours.saturating_sub(1);
            old_twice += old.saturating_sub(1);
        }
        checks.push(TableCheck {
            table: table.name.clone(),
            topic: table.topic.clone(),
            from: from.to_string(),
            until: until.to_string(),
            rows: current.len() as u64,
            missing,
            records,
            duplicates_old_and_ours: both,
            duplicates_ours: ours_twice,
            duplicates_old: old_twice,
        });
    }
    Ok(checks)
}
