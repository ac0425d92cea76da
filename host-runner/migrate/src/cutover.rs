//! `snow-connect migrate cutover`: starting a translated source where the old connector
//! stopped, losing nothing, with its duplicates counted before it starts (ADR 0029).
//!
//! * **The old position.** The old connector's last committed offset, read from the Connect
//!   offsets topic it used (records keyed `["<connector>", {partition}]`, the last value of each
//!   partition winning) or given by hand. Confluent never published its offsets' JSON, so the
//!   reader takes the forms seen in the field: a timestamp under `timestamp`, `sys_updated_on`,
//!   `last_timestamp`, `ts`, `offset` or `time` (ServiceNow's `YYYY-MM-DD HH:MM:SS`, ISO 8601, or
//!   epoch milliseconds); the table from a partition value naming it (or ending `/<table>`, as V2's
//!   API path does), else the connector's only table. Anything else is refused, naming it.
//! * **Our start.** The cursor `(T, "")` — every row of second T and later is read again, whatever
//!   the old connector did within T (its same-second paging bug included) — and the first sweep
//!   re-reads our overlap before it, `[T − overlap, …)`, for rows committed late.
//! * **The seed.** The old connector's records from `T − overlap` on (its topic's tail, read by
//!   record time from `T − overlap − margin`) give the versions `(timestamp, sys_id, sys_mod_count)`
//!   it already wrote; they travel in the stored position (up to `seed_max`) and the first re-read
//!   suppresses exactly those versions. A version the seed does not hold may be written again: the
//!   printed duplicate bound is how many such versions the tail holds (counted, not estimated).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use snow_core::config::{SourceConfig, TableConfig};
use snow_core::cursor::{Cursor, Partition, SeenVersion};
use snow_core::time::Timestamp;

use super::topic_versions::{self, timestamp_of};
use snow_runtime::config::ConnectorSpec;
use snow_runtime::kafka::tools::{self, Connection};

/// Field names an old offset's timestamp is looked for under, in this order.
const TIMESTAMP_FIELDS: [&str; 6] = ["timestamp", "sys_updated_on", "last_timestamp", "ts", "offset", "time"];

/// Where the old connector's position comes from.
#[derive(Debug, Clone)]
pub enum OldPosition {
    /// Its last committed offsets in a Connect offsets topic.
    OffsetsTopic {
        /// The topic (`offset.storage.topic` of the old Connect cluster).
        topic: String,
        /// The old connector's name.
        connector: String,
    },
    /// Given by hand (`--since`), for every table of ours.
    Given(Timestamp),
    /// A file of `GET /connectors/<name>/offsets` (KIP-875's `{"offsets":[{"partition","offset"}]}`),
    /// as Confluent Cloud's and Connect's REST APIs answer it.
    OffsetsFile(PathBuf),
}

/// What the cutover needs besides our connector.
#[derive(Debug, Clone)]
pub struct Request {
    /// The old connector's position.
    pub old: OldPosition,
    /// The table of ours the old position is for, when the old offsets do not name one.
    pub table: Option<String>,
    /// Only the old partitions whose JSON contains this (V2's `api2`, for example).
    pub old_partition: Option<String>,
    /// The topic the old connector wrote (default: our table's topic, which the translation kept).
    pub old_topic: Option<String>,
    /// Most versions carried in the stored position.
    pub seed_max: usize,
    /// How far before `T − overlap` the old topic is read by record time (clocks differ).
    pub clock_margin_seconds: i64,
    /// How long reading a topic may take.
    pub timeout: Duration,
}

/// The cutover of one table.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TablePlan {
    /// Our table.
    pub table: String,
    /// The old connector's position T.
    pub old_timestamp: String,
    /// Where T came from.
    pub old_from: String,
    /// Our stored cursor `(T, "")`.
    pub start: String,
    /// Where our first sweep re-reads from: `T − overlap`.
    pub reread_from: String,
    /// Our partition key (the offset store's and KIP-875's partition).
    pub partition: String,
    /// The topic the old connector's records were read from.
    pub old_topic: String,
    /// Whether that topic exists (if not, nothing was seeded and nothing can be duplicated).
    pub old_topic_found: bool,
    /// Versions the old topic holds from `reread_from` on.
    pub tail_versions: u64,
    /// Of those, carried in the position.
    pub seeded: u64,
    /// The duplicates this cutover can cost: tail versions not in the seed.
    pub duplicate_bound: u64,
    /// Records of the tail that could not be read as rows (no id or timestamp).
    pub unreadable_records: u64,
    /// The versions carried in the position (the seed).
    #[serde(skip)]
    pub seen: Vec<SeenVersion>,
}

impl TablePlan {
    /// The position to store: our cursor with the seed.
    pub fn position(&self) -> String {
        let ts = Timestamp::parse(&self.old_timestamp).unwrap_or(Timestamp::EPOCH);
        Cursor::before(ts).to_position_with(&self.seen)
    }
}

/// The timestamp of an old offset, and the field it was found under.
pub fn old_offset_timestamp(offset: &Value) -> Result<(Timestamp, String), String> {
    if let Some(t) = timestamp_of(offset).filter(|_| !offset.is_object()) {
        return Ok((t, "(the offset itself)".into()));
    }
    let Some(map) = offset.as_object() else { return Err(format!("the offset {offset} is not an object or a timestamp")) };
    for name in TIMESTAMP_FIELDS {
        if let Some(t) = map.get(name).and_then(timestamp_of) {
            return Ok((t, name.into()));
        }
    }
    let found: Vec<(&String, Timestamp)> = map.iter().filter_map(|(k, v)| timestamp_of(v).map(|t| (k, t))).collect();
    match found.as_slice() {
        [(k, t)] => Ok((*t, (*k).clone())),
        [] => Err(format!("no timestamp in the offset {offset} (looked for {} and any field holding one)", TIMESTAMP_FIELDS.join(", "))),
        many => Err(format!(
            "the offset {offset} holds several timestamps ({}): give the position with --since",
            many.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>().join(", ")
        )),
    }
}

/// The table of ours an old partition names, if it names one.
pub fn table_named(partition: &Value, tables: &[&str]) -> Option<String> {
    let mut strings = Vec::new();
    collect_strings(partition, &mut strings);
    tables
        .iter()
        .find(|t| strings.iter().any(|s| s == *t || s.ends_with(&format!("/{t}")) || s.ends_with(&format!(".{t}"))))
        .map(|t| t.to_string())
}

fn collect_strings(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|v| collect_strings(v, out)),
        Value::Object(map) => map.values().for_each(|v| collect_strings(v, out)),
        _ => {}
    }
}

/// The old connector's last committed offsets, `(partition, offset)`, from a Connect offsets topic.
pub fn old_offsets(connection: &Connection, topic: &str, connector: &str, timeout: Duration) -> Result<Vec<(Value, Value)>> {
    let mut last: BTreeMap<String, Option<Value>> = BTreeMap::new();
    let mut names = std::collections::BTreeSet::new();
    tools::read(connection, topic, None, timeout, |record| {
        let Some((name, partition)) = record.key.and_then(snow_runtime::offsets::kafka::decode_key) else { return };
        if name != connector {
            names.insert(name);
            return;
        }
        let value = record.value.and_then(|v| serde_json::from_slice::<Value>(v).ok());
        last.insert(partition, value);
    })
    .with_context(|| format!("reading the offsets topic {topic}"))?;
    let offsets: Vec<(Value, Value)> =
        last.into_iter().filter_map(|(p, v)| Some((serde_json::from_str(&p).unwrap_or(Value::String(p)), v?))).collect();
    if offsets.is_empty() {
        bail!(
            "no committed offset of connector {connector:?} in {topic} (connectors with offsets there: {})",
            if names.is_empty() { "none".to_string() } else { names.into_iter().collect::<Vec<_>>().join(", ") }
        );
    }
    Ok(offsets)
}

/// Our tables, as the connector's configuration reads them.
pub fn tables_of(spec: &ConnectorSpec) -> Result<(String, Vec<TableConfig>, u32)> {
    let config = SourceConfig::parse(&spec.guest_config).map_err(|e| anyhow::anyhow!("connector {}: {e}", spec.name))?;
    Ok((config.instance.authority.clone(), config.tables, config.overlap_seconds))
}

/// Plans the cutover of `spec`'s tables from the old position (nothing written yet).
pub async fn plan(connection: &Connection, spec: &ConnectorSpec, request: &Request) -> Result<Vec<TablePlan>> {
    let (authority, tables, overlap) = tables_of(spec)?;
    let names: Vec<&str> = tables.iter().map(|t| t.name.as_str()).collect();
    let only = |why: &str| -> Result<String> {
        match (&request.table, names.as_slice()) {
            (Some(t), _) if names.contains(&t.as_str()) => Ok(t.clone()),
            (Some(t), _) => bail!("--table {t}: not a table of connector {} ({})", spec.name, names.join(", ")),
            (None, [one]) => Ok(one.to_string()),
            (None, _) => bail!("{why}; name the table of ours it is for with --table ({})", names.join(", ")),
        }
    };
    let mut positions: Vec<(String, Timestamp, String)> = Vec::new();
    match &request.old {
        OldPosition::Given(at) => {
            let chosen: Vec<String> = match &request.table {
                Some(_) => vec![only("")?],
                None => names.iter().map(|n| n.to_string()).collect(),
            };
            positions.extend(chosen.into_iter().map(|t| (t, *at, "--since".to_string())));
        }
        OldPosition::OffsetsTopic { .. } | OldPosition::OffsetsFile(_) => {
            let (offsets, source) = match &request.old {
                OldPosition::OffsetsTopic { topic, connector } => {
                    (old_offsets(connection, topic, connector, request.timeout)?, format!("{topic}: connector {connector}"))
                }
                OldPosition::OffsetsFile(path) => (offsets_file(path)?, path.display().to_string()),
                OldPosition::Given(_) => unreachable!("handled above"),
            };
            let chosen: Vec<&(Value, Value)> =
                offsets.iter().filter(|(p, _)| request.old_partition.as_deref().is_none_or(|want| p.to_string().contains(want))).collect();
            if chosen.is_empty() {
                bail!("{source}: no old partition contains {:?}", request.old_partition.as_deref().unwrap_or_default());
            }
            for (partition, offset) in chosen {
                let (at, field) = old_offset_timestamp(offset).map_err(|e| anyhow::anyhow!("{source}, partition {partition}: {e}"))?;
                let table = match table_named(partition, &names) {
                    Some(t) => t,
                    None => only(&format!("the old partition {partition} names no table of ours"))?,
                };
                if positions.iter().any(|(t, _, _)| *t == table) {
                    bail!("two old partitions map to table {table}: pick one with --old-partition TEXT (a part of its JSON) and --table");
                }
                positions.push((table, at, format!("{source}, partition {partition}, field {field} of {offset}")));
            }
        }
    }
    let mut plans = Vec::new();
    for (name, at, from) in positions {
        let table = tables.iter().find(|t| t.name == name).expect("a table of ours");
        let reread_from = at.plus_seconds(-i64::from(overlap)).max(table.start);
        let old_topic = request.old_topic.clone().unwrap_or_else(|| table.topic.clone());
        let converters = snow_runtime::convert::sink::SinkConverters::new(spec.convert.clone(), None);
        let tail =
            topic_versions::read(connection, &converters, &old_topic, table, reread_from, request.clock_margin_seconds, request.timeout)
                .await
                .with_context(|| format!("reading the old connector's topic {old_topic}"))?;
        let (old_topic_found, unreadable) = (tail.found, tail.unreadable);
        let versions: std::collections::BTreeSet<(Timestamp, String, String)> = tail
            .written
            .into_iter()
            .filter(|w| w.version.ts >= reread_from)
            .map(|w| (w.version.ts, w.version.id, w.version.mod_count))
            .collect();
        let tail_versions = versions.len() as u64;
        // The versions nearest the old position are kept when the seed must be cut.
        let seen: Vec<SeenVersion> =
            versions.into_iter().rev().take(request.seed_max).map(|(ts, id, mod_count)| SeenVersion { ts, id, mod_count }).collect();
        let seeded = seen.len() as u64;
        plans.push(TablePlan {
            table: name.clone(),
            old_timestamp: at.to_string(),
            old_from: from,
            start: Cursor::before(at).to_position(),
            reread_from: reread_from.to_string(),
            partition: Partition::of(&authority, table).key(),
            old_topic,
            old_topic_found,
            tail_versions,
            seeded,
            duplicate_bound: tail_versions - seeded,
            unreadable_records: unreadable,
            seen,
        });
    }
    Ok(plans)
}

/// The `(partition, offset)` pairs of a KIP-875 answer saved to a file.
pub fn offsets_file(path: &std::path::Path) -> Result<Vec<(Value, Value)>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let value: Value = serde_json::from_str(&text).with_context(|| format!("{}: not JSON", path.display()))?;
    let items = value.get("offsets").unwrap_or(&value).as_array().cloned().unwrap_or_default();
    let pairs: Vec<(Value, Value)> = items
        .into_iter()
        .filter_map(|item| Some((item.get("partition")?.clone(), item.get("offset").filter(|o| !o.is_null())?.clone())))
        .collect();
    if pairs.is_empty() {
        bail!("{}: no {{\"partition\", \"offset\"}} pairs (the answer of GET /connectors/<name>/offsets is expected)", path.display());
    }
    Ok(pairs)
}

/// The KIP-875 body for `PATCH /connectors/<name>/offsets`.
pub fn kip875(plans: &[TablePlan]) -> Value {
    let offsets: Vec<Value> = plans
        .iter()
        .map(|p| {
            json!({
                "partition": serde_json::from_str::<Value>(&p.partition).unwrap_or(Value::Null),
                "offset": serde_json::from_str::<Value>(&p.position()).unwrap_or(Value::Null),
            })
        })
        .collect();
    json!({ "offsets": offsets })
}

/// Adds `connector`'s KIP-875 body to the JSON file `--apply --offsets` reads (other connectors'
/// bodies kept).
pub fn write_offsets_file(path: &PathBuf, connector: &str, plans: &[TablePlan]) -> Result<()> {
    let mut all: BTreeMap<String, Value> = match std::fs::read_to_string(path) {
        Ok(text) => serde_json::from_str(&text).with_context(|| format!("{}: not a file `migrate cutover --out` wrote", path.display()))?,
        Err(_) => BTreeMap::new(),
    };
    let body = kip875(plans);
    match all.get_mut(connector).and_then(|v| v.get_mut("offsets")).and_then(Value::as_array_mut) {
        Some(existing) => {
            for item in body["offsets"].as_array().into_iter().flatten() {
                existing.retain(|e| e["partition"] != item["partition"]);
                existing.push(item.clone());
            }
        }
        None => {
            all.insert(connector.to_string(), body);
        }
    }
    std::fs::write(path, format!("{:#}\n", json!(all))).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_offsets_in_the_forms_seen_in_the_field() {
        let t = Timestamp::parse("2024-11-20 08:00:00").unwrap();
        for offset in [
            json!({"timestamp": "2024-11-20 08:00:00", "sysparm_offset": null, "schema": null}),
            json!({"timestamp": "2024-11-20T08:00:00Z"}),
            json!({"offset": "2024-11-20T08:00:00.000+00:00"}),
            json!({"last_seen": 1_732_089_600_000_i64}),
            json!({"version": "1", "timestamp": "2024-11-20 08:00:00", "sys_id": "abc", "phase": "stream"}),
            json!("2024-11-20 08:00:00"),
        ] {
            assert_eq!(old_offset_timestamp(&offset).map(|(at, _)| at), Ok(t), "{offset}");
        }
        assert!(old_offset_timestamp(&json!({"page": 3})).unwrap_err().contains("no timestamp"));
        assert!(old_offset_timestamp(&json!({"a": "2024-11-20 08:00:00", "b": "2024-11-21 08:00:00"})).unwrap_err().contains("several"));
    }

    #[test]
    fn a_saved_offsets_answer_is_read() {
        let path = std::env::temp_dir().join(format!("snow-old-offsets-{}.json", std::process::id()));
        let answer = json!({"offsets": [
            {"partition": {"table": "incident"}, "offset": {"timestamp": "2024-11-20 08:00:00"}},
            {"partition": {"table": "gone"}, "offset": null}
        ]});
        std::fs::write(&path, answer.to_string()).unwrap();
        let pairs = offsets_file(&path).unwrap();
        assert_eq!(pairs, [(json!({"table": "incident"}), json!({"timestamp": "2024-11-20 08:00:00"}))]);
        std::fs::write(&path, "{}").unwrap();
        assert!(offsets_file(&path).unwrap_err().to_string().contains("no {\"partition\""));
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn partitions_name_tables_as_each_product_writes_them() {
        let tables = ["incident", "problem"];
        assert_eq!(table_named(&json!({"servicenow.table": "incident"}), &tables).as_deref(), Some("incident"));
        assert_eq!(table_named(&json!({"url": "https://x.service-now.com/api/now/table/problem"}), &tables).as_deref(), Some("problem"));
        assert_eq!(
            table_named(&json!({"instance": "x", "table": "problem", "query_fingerprint": "sha256:1"}), &tables).as_deref(),
            Some("problem")
        );
        assert_eq!(table_named(&json!({"api": "api1"}), &tables), None);
    }
}
