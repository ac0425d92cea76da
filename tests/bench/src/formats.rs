//! `snow-bench formats`: what each value converter costs per row in the host, against writing the
//! row's JSON as read (the default). Rows are fake-snow's incident rows (41 fields, references,
//! timestamps) typed by a 41-field table schema like the one the dictionary gives; each format
//! goes through the host's own code: `SourceConverters::record` for a source, and
//! `SinkConverters::record` reading the same bytes back for a sink. The registry formats register
//! their schema once with a real registry (Apicurio, started by the harness); records are then
//! converted from the caches, as in a run.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use snow_data::{Field, Kind, Schema, connect_json};
use snow_runtime::component::bindings::types::SinkRecord;
use snow_runtime::convert::Converters;
use snow_runtime::convert::sink::SinkConverters;
use snow_runtime::convert::source::SourceConverters;
use snow_runtime::convert::spec::ConvertSpec;

use crate::measure::median;
use crate::paths::{machine, write_report};

const ROWS: usize = 20_000;
const ROUNDS: usize = 9;

/// A table schema for the seeded incident rows: timestamps, integers, a boolean, strings.
fn table_schema(row: &serde_json::Map<String, serde_json::Value>) -> Schema {
    let mut fields: Vec<Field> = row
        .keys()
        .map(|name| {
            let schema = match name.as_str() {
                "sys_id" => Schema::new(Kind::String),
                n if n.ends_with("_on") || n.ends_with("_at") => Schema::timestamp().optional(),
                "state" | "impact" | "urgency" | "priority" | "severity" | "escalation" | "reassignment_count" | "reopen_count"
                | "sys_mod_count" => Schema::new(Kind::Int32).optional(),
                "active" | "made_sla" | "knowledge" => Schema::new(Kind::Boolean).optional(),
                _ => Schema::new(Kind::String).optional(),
            };
            Field::new(name, schema)
        })
        .collect();
    fields.sort_by_key(|f| f.name != "sys_id");
    Schema::record("servicenow.incident", fields)
}

struct Line {
    format: &'static str,
    source_ns: f64,
    sink_ns: Option<f64>,
    bytes: f64,
}

/// One format's converters and its timings so far.
struct Bench {
    format: &'static str,
    topic: String,
    source: SourceConverters,
    sink: SinkConverters,
    source_rounds: Vec<Duration>,
    sink_rounds: Vec<Duration>,
    bytes: usize,
}

impl Bench {
    /// One round: every row through the source's converters, then those bytes back through the sink's.
    fn round(&mut self, rows: &[(String, Vec<u8>)], rt: &tokio::runtime::Runtime) -> Result<()> {
        let format = self.format;
        let started = Instant::now();
        let mut written = Vec::with_capacity(ROWS);
        for (id, row) in rows {
            let (_, value, _) = if self.source.active() {
                self.source.record(Some(id.as_bytes()), Some(row)).map_err(|e| anyhow::anyhow!("{format}: {e:?}"))?
            } else {
                (Some(id.as_bytes().to_vec()), Some(row.clone()), Vec::new())
            };
            written.push(value.unwrap_or_default());
        }
        self.source_rounds.push(started.elapsed());
        self.bytes = written.iter().map(Vec::len).sum();
        if self.sink.active() {
            let started = Instant::now();
            for (offset, value) in written.into_iter().enumerate() {
                let record = SinkRecord {
                    topic: self.topic.clone(),
                    partition: 0,
                    offset: offset as i64,
                    key: None,
                    value: Some(value),
                    headers: Vec::new(),
                    timestamp_ms: None,
                };
                rt.block_on(self.sink.record(&record)).map_err(|e| anyhow::anyhow!("{format}: reading back: {e:?}"))?;
            }
            self.sink_rounds.push(started.elapsed());
        }
        Ok(())
    }
}

/// Runs every format over the same rows and writes the table to docs/benchmarks.md.
pub fn run() -> Result<()> {
    let rows: Vec<(String, Vec<u8>)> = (0..ROWS as u64)
        .map(|n| {
            let mut row = fake_snow::seed::incident(n + 1, 1_714_557_600 + n as i64, "http://bench");
            let id = format!("{:032x}", n + 1);
            row.insert("sys_id".into(), serde_json::json!(id));
            (id, serde_json::to_vec(&row).unwrap_or_default())
        })
        .collect();
    let first: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(&rows[0].1)?;
    let schema_text = connect_json::schema_to_json(&table_schema(&first)).to_string();
    let registry = kafka_harness::registry::shared().url();
    let formats: [(&str, Vec<(&str, &str)>); 6] = [
        ("row JSON as read (no converter)", vec![]),
        (
            "JsonConverter, schemas.enable=false",
            vec![("value.converter", "org.apache.kafka.connect.json.JsonConverter"), ("value.converter.schemas.enable", "false")],
        ),
        ("JsonConverter (envelope)", vec![("value.converter", "org.apache.kafka.connect.json.JsonConverter")]),
        (
            "AvroConverter",
            vec![("value.converter", "io.confluent.connect.avro.AvroConverter"), ("value.converter.schema.registry.url", &registry)],
        ),
        (
            "JsonSchemaConverter",
            vec![("value.converter", "io.confluent.connect.json.JsonSchemaConverter"), ("value.converter.schema.registry.url", &registry)],
        ),
        (
            "ProtobufConverter",
            vec![
                ("value.converter", "io.confluent.connect.protobuf.ProtobufConverter"),
                ("value.converter.schema.registry.url", &registry),
            ],
        ),
    ];
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    // Every format's converters first (schemas registered), then the rounds interleaved across
    // formats, so that a slower spell of a shared machine falls on each format alike.
    let mut benches = Vec::new();
    for (i, (format, keys)) in formats.iter().enumerate() {
        let entries = keys.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let mut errors = Vec::new();
        let spec = ConvertSpec::from_entries(&entries, &mut errors);
        anyhow::ensure!(errors.is_empty(), "{format}: {errors:?}");
        let converters = Converters::new(spec, None);
        let mut source = SourceConverters::new(converters.clone());
        let topic = format!("bench-formats-{}-{i}", std::process::id());
        if source.active() {
            rt.block_on(source.schema(&topic, &schema_text))
                .map_err(anyhow::Error::msg)
                .with_context(|| format!("{format}: registering"))?;
        }
        let sink = SinkConverters::new(converters, None);
        benches.push(Bench { format, topic, source, sink, source_rounds: Vec::new(), sink_rounds: Vec::new(), bytes: 0 });
    }
    for _ in 0..ROUNDS {
        for b in &mut benches {
            b.round(&rows, &rt)?;
        }
    }
    let per_row = |rounds: &mut Vec<Duration>| median(rounds).as_nanos() as f64 / ROWS as f64;
    let mut lines = Vec::new();
    for mut b in benches {
        let line = Line {
            format: b.format,
            source_ns: per_row(&mut b.source_rounds),
            sink_ns: (!b.sink_rounds.is_empty()).then(|| per_row(&mut b.sink_rounds)),
            bytes: b.bytes as f64 / ROWS as f64,
        };
        eprintln!("{}: source {:.0} ns/row, {:.0} bytes/row", line.format, line.source_ns, line.bytes);
        lines.push(line);
    }
    let raw = lines[0].source_ns;
    let mut report = format!(
        "Run by `make bench` (`target/release/snow-bench formats`) on {}: {ROWS} fake-snow incident rows (41 fields), each format \
         through the host's own converter code, median of {ROUNDS} rounds interleaved across the formats, one thread. \"Source\" is a row's JSON as the component \
         read it to the record's value bytes (typing by the table's schema included); \"sink\" reads those bytes back into the \
         Table API body the sink component gets. Registry formats use ids cached after the first registration.\n\n\
         | value format | source ns/row | × raw | sink ns/row | value bytes/row |\n|---|---|---|---|---|\n",
        machine()
    );
    for l in &lines {
        let sink = l.sink_ns.map_or("- (the component reads it)".to_string(), |ns| format!("{ns:.0}"));
        report.push_str(&format!("| {} | {:.0} | {:.1} | {sink} | {:.0} |\n", l.format, l.source_ns, l.source_ns / raw.max(1.0), l.bytes));
    }
    write_report("formats", "Value formats (make bench)", &report)
}
