//! `snow-bench transforms`: what a transform costs per record in the host's chain, Connect's
//! built-in transforms against transform components (docs/transforms.md). Records are fake-snow's
//! incident rows (41 fields) as a source's transforms see them without a typed converter
//! (schemaless maps); each chain runs through `Chain::apply` as the source unit runs it, one record
//! at a time on one thread, components loaded and bound as the runner binds them (pooled instances,
//! store limits, the closed gate). A component's cost is the host writing the record as JSON text,
//! the call across the component boundary, the component's own work, and reading its records back.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use snow_data::transform::{Chain, External, Record};
use snow_data::{Kind, Schema, Value};
use snow_runtime::artefact::{Checked, TrustPolicy};
use snow_runtime::component::transform::{Stage, TransformComponent};
use snow_runtime::component::{ComponentRuntime, Loaded, StoreOptions};
use snow_runtime::metrics::Metrics;

use crate::measure::median;
use crate::paths::{machine, write_report};

const RECORDS: usize = 20_000;
const ROUNDS: usize = 5;

/// One chain to measure.
struct Case {
    what: &'static str,
    entries: Vec<(&'static str, String)>,
}

fn records() -> Vec<Record> {
    (0..RECORDS as u64)
        .map(|n| {
            let row = fake_snow::seed::incident(n + 1, 1_714_557_600 + n as i64, "http://bench");
            let json = serde_json::Value::Object(row);
            let (_, value) = snow_data::connect_json::decode(Some(json.to_string().as_bytes()), false).unwrap_or((None, Value::Null));
            Record {
                topic: "servicenow.incident".into(),
                partition: None,
                offset: None,
                key_schema: Some(Schema::new(Kind::String)),
                key: Value::String(format!("{:032x}", n + 1)),
                value_schema: None,
                value,
                timestamp: Some(1_714_557_600_000),
                headers: Vec::new(),
            }
        })
        .collect()
}

/// Loads the component at `path` as the runner does (unsigned here: the bench measures calls).
async fn component(runtime: &ComponentRuntime, path: &str, alias: &str, own: &BTreeMap<String, String>) -> Result<Arc<TransformComponent>> {
    let checked = Checked::inspect(std::path::Path::new(path), &TrustPolicy::unsigned())?;
    let Loaded::Transform(pre) = runtime.load(&checked).await? else { anyhow::bail!("{path} is not a transform component") };
    let config = own
        .iter()
        .filter(|(k, _)| !k.starts_with("component."))
        .map(|(k, v)| snow_runtime::component::bindings::types::ConfigEntry { key: k.clone(), value: v.clone() })
        .collect();
    let options = StoreOptions { memory_max_bytes: 256 << 20, call_timeout: Duration::from_secs(5) };
    let stage = Stage { connector: "bench".into(), alias: alias.to_string(), config, options };
    let t = TransformComponent::new(pre, checked.digest(), runtime.engine().clone(), stage, Metrics::default());
    let problems = t.validate().await?;
    anyhow::ensure!(problems.is_empty(), "{path}: {problems:?}");
    Ok(Arc::new(t))
}

/// Runs each chain over the same records and writes the table to docs/benchmarks.md.
pub fn run() -> Result<()> {
    let label = guest_artifacts::TRANSFORM_LABEL;
    anyhow::ensure!(
        std::path::Path::new(label).is_file(),
        "{label} is missing: make bench builds it (node examples/transform-js/build.mjs)"
    );
    let component_stage = |path: &str, own: &[(&'static str, &str)]| {
        let mut e = vec![
            ("transforms", "t".to_string()),
            ("transforms.t.type", snow_data::transform::COMPONENT_CLASS.to_string()),
            ("transforms.t.component.path", path.to_string()),
        ];
        e.extend(own.iter().map(|(k, v)| (*k, v.to_string())));
        e
    };
    let cases = [
        Case {
            what: "InsertField$Value (built in): add a field",
            entries: vec![
                ("transforms", "t".into()),
                ("transforms.t.type", "org.apache.kafka.connect.transforms.InsertField$Value".into()),
                ("transforms.t.static.field", "priority_label".into()),
                ("transforms.t.static.value", "High".into()),
            ],
        },
        Case {
            what: "ReplaceField$Value (built in): rename a field",
            entries: vec![
                ("transforms", "t".into()),
                ("transforms.t.type", "org.apache.kafka.connect.transforms.ReplaceField$Value".into()),
                ("transforms.t.renames", "short_description:summary".into()),
            ],
        },
        Case {
            what: "component, Rust (tests/guests/rogue-transform): pass through, adds a header",
            entries: component_stage(guest_artifacts::ROGUE_TRANSFORM, &[]),
        },
        Case {
            what: "component, Rust (examples/transform-rust explode): parse, one record out",
            entries: component_stage(guest_artifacts::TRANSFORM_EXPLODE, &[("transforms.t.field", "number")]),
        },
        Case {
            what: "component, JavaScript (examples/transform-js label): parse, add a field",
            entries: component_stage(
                label,
                &[("transforms.t.field", "priority"), ("transforms.t.labels", "1:Critical,2:High,3:Moderate,4:Low,5:Planning")],
            ),
        },
    ];
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let runtime = ComponentRuntime::new()?;
    let records = records();
    let mut lines = Vec::new();
    for case in &cases {
        let entries: BTreeMap<String, String> = case.entries.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
        let mut errors = Vec::new();
        let chain = Chain::from_entries(&entries, &mut errors);
        anyhow::ensure!(errors.is_empty(), "{}: {errors:?}", case.what);
        let mut bound: BTreeMap<String, Arc<dyn External>> = BTreeMap::new();
        for (alias, own) in chain.components() {
            let path = own.get("component.path").cloned().unwrap_or_default();
            let t = rt.block_on(component(&runtime, &path, alias, own)).with_context(|| case.what)?;
            bound.insert(alias.to_string(), t);
        }
        let chain = chain.bind(|alias| bound[alias].clone());
        let mut rounds = Vec::new();
        for _ in 0..ROUNDS {
            // Each round's records are copied before the clock starts: the chain takes them by value.
            let round = records.clone();
            let started = Instant::now();
            let mut out = 0usize;
            for r in round {
                out += rt.block_on(chain.apply(r)).map_err(|e| anyhow::anyhow!("{}: {e}", case.what))?.len();
            }
            rounds.push(started.elapsed());
            anyhow::ensure!(out == RECORDS, "{}: {out} records out of {RECORDS}", case.what);
        }
        let ns = median(&mut rounds).as_nanos() as f64 / RECORDS as f64;
        eprintln!("{}: {ns:.0} ns/record", case.what);
        lines.push((case.what, ns));
    }
    let builtin = lines[0].1;
    let mut report = format!(
        "Run by `make bench` (`target/release/snow-bench transforms`) on {}: {RECORDS} fake-snow incident rows (41 fields, \
         schemaless maps as a source's transforms see them without a typed converter) through a one-stage chain, one record at a \
         time on one thread, median of {ROUNDS} rounds (each round's records copied before its clock starts). A component's cost is the \
         host writing the record as JSON text, the call across the boundary (a pooled instance), the component's work, and \
         reading its records back.\n\n| stage | µs/record | × InsertField |\n|---|---|---|\n",
        machine()
    );
    for (what, ns) in &lines {
        report.push_str(&format!("| {what} | {:.1} | {:.0} |\n", ns / 1000.0, ns / builtin.max(1.0)));
    }
    write_report("transforms", "Transforms: built in and components (make bench)", &report)
}
