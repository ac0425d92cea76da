//! Typed values with a real schema registry (Apicurio Registry's Confluent-compatible API, from
//! Maven Central): the source types rows by their table's dictionary, registers the schema and
//! writes Confluent's wire format, and Confluent's own Python client reads what we wrote.
//!
//! Longer than our 600-line mark: one scenario per value format against a real registry, each with
//! the third-party reader's check.

use crate::support;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use fake_snow::store::DictField;
use fake_snow::{FakeOptions, FakeSnow};
use serde_json::Value;
use support::{Runner, connector_file, now_secs, unique, work_dir};

/// The Python environment `make test` sets up (tests/python/requirements.txt).
fn python() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/python/bin/python");
    assert!(p.exists(), "{} is missing: `make test` sets it up (tests/python/requirements.txt)", p.display());
    p
}

/// Reads `count` records of `topic` with Confluent's AvroDeserializer; one JSON value per record,
/// or what the consumer printed when it read fewer.
fn avro_consume(topic: &str, registry: &str, count: usize) -> Result<Vec<Value>, String> {
    registry_consume(topic, registry, count, "avro")
}

/// Reads `count` records of `topic` with Confluent's deserializer of `format` (`avro`, `json`).
fn registry_consume(topic: &str, registry: &str, count: usize, format: &str) -> Result<Vec<Value>, String> {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/python/registry_consume.py");
    let out = Command::new(python())
        .arg(script)
        .args([kafka_harness::shared().bootstrap(), topic, registry, &count.to_string(), "120", format])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!("the Python consumer read too few records:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr)));
    }
    Ok(stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect())
}

/// The incident dictionary the test types rows by (the seeded rows carry more fields).
fn dictionary() -> Vec<DictField> {
    vec![
        DictField::typed("sys_id", "GUID"),
        DictField::typed("sys_updated_on", "glide_date_time"),
        DictField::typed("sys_mod_count", "integer"),
        DictField::typed("number", "string"),
        DictField::typed("priority", "integer"),
        DictField { choice: true, ..DictField::typed("state", "integer") },
        DictField::typed("active", "boolean"),
        DictField { reference: Some("sys_user".into()), ..DictField::typed("caller_id", "reference") },
        DictField::typed("opened_at", "glide_date_time"),
        DictField { attributes: "scale=2".into(), ..DictField::typed("u_cost", "decimal") },
    ]
}

/// A fake whose incident table holds `rows` seeded rows, the first `costed` of them with the decimal
/// `u_cost` the seed does not write (`1234.5`: fewer digits than its scale), the test dictionary
/// set, and its standing clock moved past the safety lag so the updated rows are readable; the
/// rows' ids and the fake's time.
fn costed_incidents(rows: u64, costed: u64) -> (FakeSnow, Vec<String>, i64) {
    let now = now_secs();
    let fake = FakeSnow::start(FakeOptions { frozen_at: Some(now), ..Default::default() }).unwrap();
    let ids = fake.shared().seed("incident", rows, now - 3600, 1800);
    let mut cost = fake_snow::store::Row::new();
    cost.insert("u_cost".into(), Value::String("1234.5".into()));
    fake.shared().update_rows("incident", &ids[..costed as usize], &cost);
    fake.clock().advance(5);
    fake.shared().store().set_dictionary("incident", &dictionary(), None, now);
    (fake, ids, now)
}

/// A source of table incident writing Avro values with the shared registry (display values `all`).
fn avro_source(fake: &FakeSnow, name: &str, topic: &str, extra: &[(&str, &str)]) -> BTreeMap<String, String> {
    let url = kafka_harness::registry::shared().url();
    let mut entries: Vec<(&str, &str)> = vec![
        ("snow.auth.type", "none"),
        ("snow.table.incident.display.value", "all"),
        ("key.converter", "org.apache.kafka.connect.storage.StringConverter"),
        ("value.converter", "io.confluent.connect.avro.AvroConverter"),
        ("value.converter.schema.registry.url", &url),
    ];
    entries.extend_from_slice(extra);
    support::source_entries(&fake.url(), name, topic, &["incident"], &entries)
}

#[test]
fn avro_values_typed_by_the_dictionary_are_read_by_confluents_deserializer() {
    const ROWS: u64 = 40;
    let registry = kafka_harness::registry::shared();
    let (fake, ids, _) = costed_incidents(ROWS, ROWS);

    let (name, topic) = (unique("avro"), unique("avro"));
    let dir = work_dir("registry-avro");
    let file = connector_file(&dir, &name, &avro_source(&fake, &name, &topic, &[]));
    let runner = Runner::start(&dir, "run", &[&file]);
    let records = avro_consume(&topic, &registry.url(), ROWS as usize);
    let log = runner.stop();
    let records = records.unwrap_or_else(|e| panic!("{e}\nthe runner's log:\n{log}"));

    let by_key: BTreeMap<&str, &Value> = records.iter().map(|r| (r["key"].as_str().unwrap(), &r["value"])).collect();
    assert_eq!(by_key.len() as u64, ROWS, "every row, once: {records:?}");
    let row = fake.shared().store().table("incident").unwrap().get(&ids[0]).cloned().unwrap();
    let v = by_key[ids[0].as_str()];
    assert_eq!(v["number"], row["number"], "text stays text");
    assert_eq!(v["priority"].as_i64().map(|p| p.to_string()), row["priority"].as_str().map(str::to_string), "integers are numbers");
    assert_eq!(v["active"].as_bool().map(|b| b.to_string()), row["active"].as_str().map(str::to_string), "booleans are booleans");
    assert_eq!(v["u_cost"]["decimal"], "1234.50", "decimals exact at their scale");
    let opened = fake_snow::time::parse_ts(row["opened_at"].as_str().unwrap()).unwrap();
    assert_eq!(v["opened_at"]["timestamp_ms"].as_i64(), Some(opened * 1000), "glide_date_time is a timestamp");
    assert_eq!(v["caller_id"], row["caller_id"]["value"], "a reference is its sys_id");
    assert_eq!(v["dv_caller_id"], row["caller_id"]["display_value"], "with its display value beside it");
    assert!(v.get("short_description").is_none(), "a field the dictionary does not list is left out");
    assert!(log.contains("field short_description of table incident is not in its dictionary"), "and said once: {log}");

    let (status, subjects) = registry.get("/apis/ccompat/v7/subjects").unwrap();
    assert_eq!(status, 200);
    assert!(subjects.contains(&format!("{topic}-value")), "registered under TopicNameStrategy: {subjects}");
}

#[test]
fn a_dictionary_change_evolves_the_schema_or_parks_the_table_naming_the_field_and_the_registrys_answer() {
    const ROWS: u64 = 20;
    let registry = kafka_harness::registry::shared();
    let now = now_secs();
    let fake = FakeSnow::start(FakeOptions { frozen_at: Some(now), ..Default::default() }).unwrap();
    let ids = fake.shared().seed("incident", ROWS, now - 3600, 1800);
    fake.shared().store().set_dictionary("incident", &dictionary(), None, now);
    let (name, topic) = (unique("evolve"), unique("evolve"));
    let dir = work_dir("registry-evolve");
    let config = avro_source(&fake, &name, &topic, &[("snow.schema.refresh.interval.ms", "10000")]);
    let mut runner = Runner::start(&dir, "run", &[&connector_file(&dir, &name, &config)]);
    let first = avro_consume(&topic, &registry.url(), ROWS as usize);
    let subject = format!("{topic}-value");
    // The subject checks new schemas as Confluent's registry does by default (Apicurio's is NONE).
    let (status, answer) = registry.put(&format!("/apis/ccompat/v7/config/{subject}"), r#"{"compatibility":"BACKWARD"}"#).unwrap();
    assert_eq!(status, 200, "{answer}");
    if let Err(e) = first {
        panic!("{e}\nthe runner's log:\n{}", runner.stop());
    }

    // A new field: an optional field with a null default, which BACKWARD accepts.
    let mut evolved = dictionary();
    evolved.push(DictField::typed("u_note", "string"));
    fake.shared().store().set_dictionary("incident", &evolved, None, now);
    let mut note = fake_snow::store::Row::new();
    note.insert("u_note".into(), Value::String("hello".into()));
    fake.shared().update_rows("incident", &ids[..5], &note);
    fake.clock().advance(5);
    let versions = support::wait_until("a second version of the value schema", Duration::from_secs(90), || {
        registry
            .get(&format!("/apis/ccompat/v7/subjects/{subject}/versions"))
            .ok()
            .map(|(_, b)| b.replace(' ', ""))
            .filter(|b| b == "[1,2]")
    });
    assert_eq!(versions, "[1,2]");
    let records = avro_consume(&topic, &registry.url(), ROWS as usize + 5).unwrap_or_else(|e| panic!("{e}"));
    let mut noted: Vec<&str> = records.iter().filter(|r| r["value"]["u_note"] == "hello").filter_map(|r| r["key"].as_str()).collect();
    noted.sort_unstable();
    let mut updated: Vec<&str> = ids[..5].iter().map(String::as_str).collect();
    updated.sort_unstable();
    assert_eq!(noted, updated, "exactly the updated rows arrive with the new field's value: {records:?}");

    // A changed type (int to string) is not BACKWARD: the table parks, naming the field and quoting the registry.
    let mut changed = evolved.clone();
    changed.retain(|f| f.element != "priority");
    changed.push(DictField::typed("priority", "string"));
    fake.shared().store().set_dictionary("incident", &changed, None, now);
    let log = runner.wait_for_log("unit parked", Duration::from_secs(90));
    let parked = log.lines().find(|l| l.contains("unit parked")).unwrap_or_default().to_string();
    assert!(parked.contains(&format!("subject {subject}")) && parked.contains("field priority changed from int32 to string"), "{parked}");
    assert!(parked.contains("answered 409"), "the registry's answer is quoted: {parked}");
    runner.stop();
}

/// Writes `lines` (registry_produce.py's input) to `topic` with Confluent's serializer of
/// `format` (`avro`, `json`) and `schema`; the schema id it registered.
fn registry_produce(topic: &str, registry: &str, format: &str, schema: &str, lines: &[Value]) -> u32 {
    use std::io::Write;
    let dir = work_dir("registry-produce");
    let schema_file = dir.join(format!("{topic}.avsc"));
    std::fs::write(&schema_file, schema).unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/python/registry_produce.py");
    let mut child = Command::new(python())
        .arg(script)
        .args([kafka_harness::shared().bootstrap(), topic, registry, schema_file.to_str().unwrap(), format])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for line in lines {
        writeln!(stdin, "{line}").unwrap();
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "the Python producer failed:\n{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// Runs a sink of table incident reading `topic` with value `converter` (a registry format at
/// `url`) until it committed `rows` records; the runner's log.
fn run_registry_sink(fake: &FakeSnow, topic: &str, converter: &str, url: &str, rows: u64) -> String {
    let name = unique("regsink");
    let dir = work_dir("registry-sink");
    let config = support::sink_entries(
        &fake.url(),
        &name,
        topic,
        "incident",
        &[
            ("snow.auth.type", "none"),
            ("key.converter", "org.apache.kafka.connect.storage.StringConverter"),
            ("value.converter", converter),
            ("value.converter.schema.registry.url", url),
        ],
    );
    let runner = Runner::start(&dir, "run", &[&connector_file(&dir, &name, &config)]);
    support::kafka::wait_committed(&format!("connect-{name}"), topic, 1, rows as i64, Duration::from_secs(120));
    runner.stop()
}

/// Checks what a sink wrote for the records the registry tests produce: row `i` of `ids` has the
/// short description `<label> i`, priority `i % 5`, opened at 10:`i` on 2024-05-01, and a cost
/// of `i.25` on even rows, empty on odd ones.
fn assert_sink_rows(fake: &FakeSnow, ids: &[String], label: &str, log: &str) {
    for (i, id) in ids.iter().enumerate() {
        let row = fake.shared().store().table("incident").unwrap().get(id).cloned().unwrap();
        let at = format!("row {i}; log:\n{}", support::tail(log, 20));
        assert_eq!(text(&row["short_description"]), format!("{label} {i}"), "{at}");
        assert_eq!(text(&row["priority"]), (i % 5).to_string(), "{at}");
        assert_eq!(text(&row["opened_at"]), format!("2024-05-01 10:{i:02}:00"), "{at}");
        let cost = if i % 2 == 0 { format!("{i}.25") } else { String::new() };
        assert_eq!(text(&row["u_cost"]), cost, "{at}");
    }
}

/// A row field as text (the fake keeps what a write gave: a number stays a number).
fn text(v: &Value) -> String {
    v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string())
}

const UPDATE_SCHEMA: &str = r#"{"type":"record","name":"IncidentUpdate","namespace":"com.example","fields":[
    {"name":"short_description","type":"string"},
    {"name":"priority","type":"int"},
    {"name":"active","type":"boolean"},
    {"name":"opened_at","type":{"type":"long","logicalType":"timestamp-millis"}},
    {"name":"u_cost","type":["null",{"type":"bytes","logicalType":"decimal","precision":12,"scale":2}],"default":null},
    {"name":"category","type":["null","string"],"default":null}]}"#;

#[test]
fn a_sink_writes_avro_from_confluents_serializer_in_servicenow_text_and_dead_letters_what_is_not_avro() {
    const RECORDS: usize = 20;
    const BAD: usize = 7;
    let registry = kafka_harness::registry::shared();
    let fake = FakeSnow::start(FakeOptions::default()).unwrap();
    let ids = fake.shared().seed("incident", RECORDS as u64, now_secs() - 3600, 1800);
    let topic = unique("avrosink");
    let opened_ms = 1_714_557_600_000_i64; // 2024-05-01 10:00:00 UTC
    let lines: Vec<Value> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| {
            if i == BAD {
                return serde_json::json!({"key": id, "raw": "{\"short_description\":\"not avro\"}"});
            }
            let cost = if i % 2 == 0 { serde_json::json!({"decimal": format!("{i}.5")}) } else { Value::Null };
            serde_json::json!({"key": id, "value": {
                "short_description": format!("avro {i}"), "priority": i % 5, "active": i % 3 == 0,
                "opened_at": {"timestamp_ms": opened_ms + i as i64 * 1000}, "u_cost": cost, "category": null}})
        })
        .collect();
    let schema_id = registry_produce(&topic, &registry.url(), "avro", UPDATE_SCHEMA, &lines);

    let url = registry.url();
    let sink = |name: &str, extra: &[(&str, &str)]| {
        let mut entries: Vec<(&str, &str)> = vec![
            ("snow.auth.type", "none"),
            ("key.converter", "org.apache.kafka.connect.storage.StringConverter"),
            ("value.converter", "io.confluent.connect.avro.AvroConverter"),
            ("value.converter.schema.registry.url", &url),
        ];
        entries.extend_from_slice(extra);
        support::sink_entries(&fake.url(), name, &topic, "incident", &entries)
    };
    // By default (errors.tolerance=none) the record no Avro reader can read stops its partition.
    let strict = unique("avrostrict");
    let dir = work_dir("registry-sink-strict");
    let mut runner = Runner::start(&dir, "run", &[&connector_file(&dir, &strict, &sink(&strict, &[]))]);
    let parked = runner.wait_for_log("parked", Duration::from_secs(120));
    runner.stop();
    let parked = parked.lines().find(|l| l.contains("parked")).unwrap_or_default().to_string();
    assert!(
        parked.contains(&format!("record {topic}-0@{BAD}: the value could not be read by io.confluent.connect.avro.AvroConverter"))
            && parked.contains("magic byte"),
        "{parked}"
    );
    let written = |i: usize| fake.shared().store().table("incident").unwrap().get(&ids[i]).cloned().unwrap();
    assert_eq!(text(&written(BAD - 1)["short_description"]), format!("avro {}", BAD - 1), "the records before it were written");
    assert!(!text(&written(BAD + 1)["short_description"]).starts_with("avro"), "none after it");

    // Tolerating record errors, it goes to the dead letter queue and the partition goes on.
    let (name, dir) = (unique("avrosink"), work_dir("registry-sink"));
    let config = sink(&name, &[("errors.tolerance", "all"), ("errors.deadletterqueue.topic.name", "${connector}-dlq")]);
    let runner = Runner::start(&dir, "run", &[&connector_file(&dir, &name, &config)]);
    support::kafka::wait_committed(&format!("connect-{name}"), &topic, 1, RECORDS as i64, Duration::from_secs(120));
    let log = runner.stop();
    for (i, id) in ids.iter().enumerate().filter(|(i, _)| *i != BAD) {
        let row = written(i);
        let at = format!("row {i} ({id}), schema id {schema_id}; log:\n{}", support::tail(&log, 20));
        assert_eq!(text(&row["short_description"]), format!("avro {i}"), "{at}");
        assert_eq!(text(&row["priority"]), (i % 5).to_string(), "{at}");
        assert_eq!(text(&row["active"]), (i % 3 == 0).to_string(), "{at}");
        assert_eq!(text(&row["opened_at"]), format!("2024-05-01 10:00:{i:02}"), "timestamps in the instance's UTC format: {at}");
        let cost = if i % 2 == 0 { format!("{i}.50") } else { String::new() };
        assert_eq!(text(&row["u_cost"]), cost, "decimals exact at their scale, null as empty: {at}");
        assert_eq!(text(&row["category"]), "", "{at}");
    }
    let dead =
        support::kafka::read_until(kafka_harness::shared().bootstrap(), &format!("{name}-dlq"), Duration::from_secs(60), |r| !r.is_empty());
    assert_eq!(dead.len(), 1, "one dead letter");
    let h = |k: &str| dead[0].headers.get(&format!("__connect.errors.{k}")).cloned().unwrap_or_default();
    assert_eq!(dead[0].value, br#"{"short_description":"not avro"}"#, "the record itself, unchanged");
    assert_eq!(
        (h("offset"), h("stage"), h("class.name")),
        (BAD.to_string(), "VALUE_CONVERTER".into(), "io.confluent.connect.avro.AvroConverter".into())
    );
    assert!(h("exception.message").contains("magic byte"), "{}", h("exception.message"));
}

#[test]
fn json_schema_values_are_read_and_written_by_confluents_json_serializers() {
    const ROWS: u64 = 10;
    let registry = kafka_harness::registry::shared();
    let (fake, ids, now) = costed_incidents(ROWS, ROWS);

    // Source: JsonSchemaConverter, read back by the JSONDeserializer (which validates each value
    // against the schema we registered).
    let (name, topic) = (unique("jsonsrc"), unique("jsonsrc"));
    let dir = work_dir("registry-json-source");
    let url = registry.url();
    let config = avro_source(&fake, &name, &topic, &[("value.converter", "io.confluent.connect.json.JsonSchemaConverter")]);
    let runner = Runner::start(&dir, "run", &[&connector_file(&dir, &name, &config)]);
    let records = registry_consume(&topic, &url, ROWS as usize, "json");
    let log = runner.stop();
    let records = records.unwrap_or_else(|e| panic!("{e}\nthe runner's log:\n{log}"));
    let row = fake.shared().store().table("incident").unwrap().get(&ids[0]).cloned().unwrap();
    let v = &records.iter().find(|r| r["key"] == ids[0].as_str()).unwrap()["value"];
    assert_eq!(v["u_cost"], serde_json::json!(1234.5), "a decimal is a JSON number: {v}");
    assert_eq!(v["priority"].as_i64().map(|p| p.to_string()), row["priority"].as_str().map(str::to_string), "integers are numbers");
    let opened = fake_snow::time::parse_ts(row["opened_at"].as_str().unwrap()).unwrap();
    assert_eq!(v["opened_at"].as_i64(), Some(opened * 1000), "glide_date_time is epoch milliseconds");
    let (_, schema) = registry.get(&format!("/apis/ccompat/v7/subjects/{topic}-value/versions/1")).unwrap();
    assert!(schema.contains("JSON"), "registered as a JSON schema: {schema}");

    // Sink: records from the JSONSerializer, written in ServiceNow's text forms (the instance
    // keeps only fields its dictionary lists, as ServiceNow does).
    let mut writable = dictionary();
    writable.push(DictField::typed("short_description", "string"));
    fake.shared().store().set_dictionary("incident", &writable, None, now);
    let sink_topic = unique("jsonsink");
    let schema = r#"{"type":"object","title":"IncidentUpdate","properties":{
        "short_description":{"type":"string"},
        "priority":{"type":"integer","connect.type":"int32"},
        "opened_at":{"type":"integer","title":"org.apache.kafka.connect.data.Timestamp","connect.type":"int64"},
        "u_cost":{"oneOf":[{"type":"null"},{"type":"number","title":"org.apache.kafka.connect.data.Decimal",
                  "connect.type":"bytes","connect.parameters":{"scale":"2"}}]}},
        "required":["short_description","priority","opened_at"]}"#;
    let lines: Vec<Value> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| {
            serde_json::json!({"key": id, "value": {"short_description": format!("json {i}"), "priority": i % 5,
                "opened_at": 1_714_557_600_000_i64 + i as i64 * 60_000, "u_cost": if i % 2 == 0 { serde_json::json!(i as f64 + 0.25) } else { Value::Null }}})
        })
        .collect();
    registry_produce(&sink_topic, &url, "json", schema, &lines);
    let log = run_registry_sink(&fake, &sink_topic, "io.confluent.connect.json.JsonSchemaConverter", &url, ROWS);
    assert_sink_rows(&fake, &ids, "json", &log);
}

#[test]
fn protobuf_values_are_read_and_written_by_confluents_protobuf_serializers() {
    const ROWS: u64 = 10;
    let registry = kafka_harness::registry::shared();
    let (fake, ids, now) = costed_incidents(ROWS, ROWS - 1);

    // Source: ProtobufConverter for key and value, read back by Python's ProtobufDeserializer with
    // classes protoc compiled from the .proto text we registered.
    let (name, topic) = (unique("protosrc"), unique("protosrc"));
    let dir = work_dir("registry-protobuf-source");
    let url = registry.url();
    let protobuf = "io.confluent.connect.protobuf.ProtobufConverter";
    let config = avro_source(
        &fake,
        &name,
        &topic,
        &[
            ("value.converter", protobuf),
            ("key.converter", protobuf),
            ("key.converter.schema.registry.url", &url),
            ("value.converter.optional.for.nullables", "true"),
            ("snow.schema.refresh.interval.ms", "10000"),
        ],
    );
    let runner = Runner::start(&dir, "run", &[&connector_file(&dir, &name, &config)]);
    let records = registry_consume(&topic, &url, ROWS as usize, "protobuf");
    let records = records.unwrap_or_else(|e| panic!("{e}\nthe runner's log:\n{}", runner.log()));

    // A dictionary change adds a field whose name sorts among the others: the fields already
    // registered keep their numbers (the new one takes the next), so every record, old and new,
    // reads right with the latest schema's class.
    let mut evolved = dictionary();
    evolved.push(DictField::typed("impact_level", "integer"));
    fake.shared().store().set_dictionary("incident", &evolved, None, now);
    let mut impact = fake_snow::store::Row::new();
    impact.insert("impact_level".into(), Value::String("3".into()));
    fake.shared().update_rows("incident", &ids[..2], &impact);
    fake.clock().advance(5);
    let subject = format!("{topic}-value");
    support::wait_until("a second version of the Protobuf value schema", Duration::from_secs(90), || {
        registry.get(&format!("/apis/ccompat/v7/subjects/{subject}/versions")).ok().filter(|(_, b)| b.replace(' ', "") == "[1,2]")
    });
    let numbers = |version: u32| -> BTreeMap<String, u32> {
        let (_, body) = registry.get(&format!("/apis/ccompat/v7/subjects/{subject}/versions/{version}")).unwrap();
        let text: Value = serde_json::from_str(&body).unwrap();
        let text = text["schema"].as_str().unwrap().to_string();
        text.lines()
            .filter_map(|l| {
                let (decl, number) = l.split_once(" = ")?;
                Some((decl.split_whitespace().last()?.to_string(), number.trim_end_matches(';').split(' ').next()?.parse().ok()?))
            })
            .collect()
    };
    let (v1, v2) = (numbers(1), numbers(2));
    assert!(v1.len() > 5 && v1.iter().all(|(field, n)| v2.get(field) == Some(n)), "numbers kept: {v1:?} {v2:?}");
    assert_eq!(v2.get("impact_level"), Some(&(v1.values().max().unwrap() + 1)), "the new field takes the next number: {v2:?}");
    let all = registry_consume(&topic, &url, ROWS as usize + 2, "protobuf");
    let log = runner.stop();
    let all = all.unwrap_or_else(|e| panic!("{e}\nthe runner's log:\n{log}"));
    let first = all.iter().find(|r| r["key"] == ids[0].as_str()).unwrap();
    assert_eq!(first["value"]["number"], records.iter().find(|r| r["key"] == ids[0].as_str()).unwrap()["value"]["number"], "{first}");
    let impacts = all.iter().filter(|r| r["value"]["impact_level"] == 3).count();
    assert_eq!(impacts, 2, "the updated rows carry the new field: {all:?}");
    let by_key: BTreeMap<&str, &Value> = records.iter().map(|r| (r["key"].as_str().expect("a StringValue key"), &r["value"])).collect();
    assert_eq!(by_key.len() as u64, ROWS, "every row once, keyed by its sys_id: {records:?}");
    let row = fake.shared().store().table("incident").unwrap().get(&ids[0]).cloned().unwrap();
    let v = by_key[ids[0].as_str()];
    assert_eq!(v["number"], row["number"], "text stays text: {v}");
    assert_eq!(v["priority"].as_i64().map(|p| p.to_string()), row["priority"].as_str().map(str::to_string), "integers are numbers");
    assert_eq!(v["u_cost"]["decimal"], "1234.50", "a confluent.type.Decimal, exact at its scale: {v}");
    let opened = fake_snow::time::parse_ts(row["opened_at"].as_str().unwrap()).unwrap();
    assert_eq!(v["opened_at"]["timestamp_ms"].as_i64(), Some(opened * 1000), "a google.protobuf.Timestamp");
    assert_eq!(v["dv_caller_id"], row["caller_id"]["display_value"], "display values beside references");
    let last = by_key[ids[ROWS as usize - 1].as_str()];
    assert_eq!(last["u_cost"], Value::Null, "an empty decimal is an absent message, read as null: {last}");
    let (_, schema) = registry.get(&format!("/apis/ccompat/v7/subjects/{topic}-value/versions/1")).unwrap();
    assert!(schema.contains("PROTOBUF") && schema.contains("message incident"), "registered as .proto text: {schema}");
    let (_, key_schema) = registry.get(&format!("/apis/ccompat/v7/subjects/{topic}-key/versions/1")).unwrap();
    assert!(key_schema.contains("StringValue"), "the key is google.protobuf.StringValue, as Connect writes a string: {key_schema}");

    // Sink: records from Python's ProtobufSerializer (which registers a base64 FileDescriptorProto),
    // written in ServiceNow's text forms.
    let mut writable = dictionary();
    writable.push(DictField::typed("short_description", "string"));
    fake.shared().store().set_dictionary("incident", &writable, None, now);
    let sink_topic = unique("protosink");
    let proto = r#"syntax = "proto3";
package acme.itsm;
import "google/protobuf/timestamp.proto";
import "confluent/type/decimal.proto";
message IncidentUpdate {
  string short_description = 1;
  int32 priority = 2;
  google.protobuf.Timestamp opened_at = 3;
  confluent.type.Decimal u_cost = 4;
}
"#;
    let lines: Vec<Value> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| {
            let cost = if i % 2 == 0 { serde_json::json!({"decimal": format!("{i}.25")}) } else { Value::Null };
            serde_json::json!({"key": id, "value": {"short_description": format!("proto {i}"), "priority": i % 5,
                "opened_at": {"timestamp_ms": 1_714_557_600_000_i64 + i as i64 * 60_000}, "u_cost": cost}})
        })
        .collect();
    let id = registry_produce(&sink_topic, &url, "protobuf", proto, &lines);
    let (_, stored) = registry.get(&format!("/apis/ccompat/v7/schemas/ids/{id}")).unwrap();
    assert!(!stored.contains("syntax"), "Python registered a base64 descriptor, which the sink must read: {stored}");
    let log = run_registry_sink(&fake, &sink_topic, protobuf, &url, ROWS);
    assert_sink_rows(&fake, &ids, "proto", &log);
}

#[test]
fn an_https_registry_is_reached_with_the_trust_store_and_client_certificate_the_converter_names() {
    const ROWS: u64 = 10;
    let registry = kafka_harness::registry::shared();
    let upstream: u16 = registry.url().split(':').nth(2).and_then(|p| p.split('/').next()).and_then(|p| p.parse().ok()).unwrap();
    let pki = work_dir("registry-tls-pki");
    kafka_harness::secure::make_certificates(&pki).unwrap();
    let front = support::tls_proxy::TlsProxy::start(&pki, upstream, true);
    let https = format!("https://127.0.0.1:{}/apis/ccompat/v7", front.port);
    let ca = pki.join("ca.pem").display().to_string();
    let keystore = pki.join("client-keystore.pem").display().to_string();
    let now = now_secs();
    let fake = FakeSnow::start(FakeOptions { frozen_at: Some(now), ..Default::default() }).unwrap();
    fake.shared().seed("incident", ROWS, now - 3600, 1800);
    fake.shared().store().set_dictionary("incident", &dictionary(), None, now);

    // Trusting the registry's CA but presenting no certificate: the registry's front refuses the
    // handshake; the table says the registry could not be reached and tries again (as a sink holds
    // its partition), never parked.
    let (name, topic) = (unique("tlsreg"), unique("tlsreg"));
    let dir = work_dir("registry-tls-refused");
    let trust_only: Vec<(&str, &str)> = vec![
        ("value.converter.schema.registry.url", &https),
        ("value.converter.schema.registry.ssl.truststore.type", "PEM"),
        ("value.converter.schema.registry.ssl.truststore.location", &ca),
    ];
    let runner = Runner::start(&dir, "run", &[&connector_file(&dir, &name, &avro_source(&fake, &name, &topic, &trust_only))]);
    let retries = |log: &str| log.lines().filter(|l| l.contains("could not be reached") && l.contains("trying again")).count();
    support::wait_until("the table to try the registry a second time", Duration::from_secs(120), || {
        (retries(&runner.log()) >= 2).then_some(())
    });
    let log = runner.stop();
    assert!(!log.contains("unit parked"), "an unreachable registry is retried, not parked: {}", support::tail(&log, 10));
    assert!(
        front.refused() >= 2 && front.accepted() == 0,
        "refused by TLS, not by the registry: {} refused, {} accepted",
        front.refused(),
        front.accepted()
    );

    // With the client certificate as well: every row arrives, its schema registered through TLS.
    let (name, topic) = (unique("tlsreg"), unique("tlsreg"));
    let dir = work_dir("registry-tls");
    let mut both = trust_only.clone();
    both.extend([
        ("value.converter.schema.registry.ssl.keystore.type", "PEM"),
        ("value.converter.schema.registry.ssl.keystore.location", &keystore),
    ]);
    let runner = Runner::start(&dir, "run", &[&connector_file(&dir, &name, &avro_source(&fake, &name, &topic, &both))]);
    let records = avro_consume(&topic, &registry.url(), ROWS as usize);
    let log = runner.stop();
    let records = records.unwrap_or_else(|e| panic!("{e}\nthe runner's log:\n{log}"));
    assert_eq!(records.len() as u64, ROWS);
    assert!(front.accepted() >= 1, "the schema went through the TLS front");
    assert!(!log.contains("BEGIN"), "no PEM in the log");
}

#[test]
fn with_use_latest_version_records_are_written_with_the_schema_the_operator_registered() {
    const ROWS: u64 = 10;
    let registry = kafka_harness::registry::shared();
    let now = now_secs();
    let fake = FakeSnow::start(FakeOptions { frozen_at: Some(now), ..Default::default() }).unwrap();
    let ids = fake.shared().seed("incident", ROWS, now - 3600, 1800);
    fake.shared().store().set_dictionary("incident", &dictionary(), None, now);
    let (name, topic) = (unique("latest"), unique("latest"));
    // The operator registers a narrower schema of their own (three fields, as Connect's AvroData
    // writes them); the connector derives a wider one but writes with this one.
    let curated = serde_json::json!({"type":"record","name":"incident","namespace":"servicenow","fields":[
        {"name":"sys_id","type":"string"},
        {"name":"number","type":["null","string"],"default":null},
        {"name":"priority","type":["null","int"],"default":null}],"connect.name":"servicenow.incident"});
    let body = serde_json::json!({"schema": curated.to_string()}).to_string();
    let (status, answer) = registry.post(&format!("/apis/ccompat/v7/subjects/{topic}-value/versions"), &body).unwrap();
    assert_eq!(status, 200, "{answer}");
    let id: Value = serde_json::from_str(&answer).unwrap();
    let dir = work_dir("registry-latest");
    let config = avro_source(
        &fake,
        &name,
        &topic,
        &[("value.converter.auto.register.schemas", "false"), ("value.converter.use.latest.version", "true")],
    );
    let runner = Runner::start(&dir, "run", &[&connector_file(&dir, &name, &config)]);
    let records = avro_consume(&topic, &registry.url(), ROWS as usize);
    let log = runner.stop();
    let records = records.unwrap_or_else(|e| panic!("{e}\nthe runner's log:\n{log}"));
    let row = fake.shared().store().table("incident").unwrap().get(&ids[0]).cloned().unwrap();
    let v = &records.iter().find(|r| r["key"] == ids[0].as_str()).unwrap()["value"];
    let fields: Vec<&String> = v.as_object().unwrap().keys().collect();
    assert_eq!(fields, ["number", "priority", "sys_id"], "exactly the registered schema's fields: {v}");
    assert_eq!(v["number"], row["number"]);
    let (_, versions) = registry.get(&format!("/apis/ccompat/v7/subjects/{topic}-value/versions")).unwrap();
    assert_eq!(versions.replace(' ', ""), "[1]", "nothing else registered (schema id {})", id["id"]);
}

#[test]
fn connects_json_envelope_carries_the_types_and_a_value_that_does_not_fit_is_skipped_or_stops_the_table() {
    const ROWS: u64 = 10;
    let now = now_secs();
    let fake = FakeSnow::start(FakeOptions { frozen_at: Some(now), ..Default::default() }).unwrap();
    let ids = fake.shared().seed("incident", ROWS, now - 3600, 1800);
    let mut bad = fake_snow::store::Row::new();
    bad.insert("priority".into(), Value::String("high".into()));
    fake.shared().update_rows("incident", &ids[3..4], &bad);
    fake.clock().advance(5);
    fake.shared().store().set_dictionary("incident", &dictionary(), None, now);
    let json_source = |name: &str, topic: &str, behavior: &str| {
        support::source_entries(
            &fake.url(),
            name,
            topic,
            &["incident"],
            &[
                ("snow.auth.type", "none"),
                ("snow.bad.row.behavior", behavior),
                ("value.converter", "org.apache.kafka.connect.json.JsonConverter"),
            ],
        )
    };

    // skip: every other row arrives in Connect's envelope, typed; the bad one is named and counted.
    let (name, topic) = (unique("jsonenv"), unique("jsonenv"));
    let dir = work_dir("registry-json-envelope");
    let mut runner = Runner::start(&dir, "run", &[&connector_file(&dir, &name, &json_source(&name, &topic, "skip"))]);
    let records =
        support::kafka::read_until(kafka_harness::shared().bootstrap(), &topic, Duration::from_secs(120), |r| r.len() as u64 >= ROWS - 1);
    let skipped = runner.wait_for_log(&format!("skipped row {}", ids[3]), Duration::from_secs(60));
    runner.stop();
    assert_eq!(records.len() as u64, ROWS - 1, "every row but the bad one");
    assert!(records.iter().all(|r| r.key != ids[3]), "the bad row is not written");
    let line = skipped.lines().find(|l| l.contains("skipped row")).unwrap_or_default().to_string();
    assert!(line.contains("field priority: \"high\" is not a whole number that fits int32"), "{line}");
    let envelope = records[0].json();
    let fields = envelope["schema"]["fields"].as_array().unwrap();
    let opened = fields.iter().find(|f| f["field"] == "opened_at").unwrap();
    assert_eq!((opened["type"].as_str(), opened["name"].as_str()), (Some("int64"), Some("org.apache.kafka.connect.data.Timestamp")));
    let row = fake.shared().store().table("incident").unwrap().get(&records[0].key).cloned().unwrap();
    let at = fake_snow::time::parse_ts(row["opened_at"].as_str().unwrap()).unwrap();
    assert_eq!(envelope["payload"]["opened_at"].as_i64(), Some(at * 1000), "{envelope}");
    assert!(envelope["payload"]["priority"].is_i64(), "{envelope}");

    // fail (the default): the table stops at the bad row, naming it and its field.
    let (name, topic) = (unique("jsonfail"), unique("jsonfail"));
    let dir = work_dir("registry-json-fail");
    let mut runner = Runner::start(&dir, "run", &[&connector_file(&dir, &name, &json_source(&name, &topic, "fail"))]);
    let log = runner.wait_for_log("unit parked", Duration::from_secs(120));
    runner.stop();
    let parked = log.lines().find(|l| l.contains("unit parked")).unwrap_or_default().to_string();
    assert!(parked.contains(&format!("row {} does not fit its schema: field priority", ids[3])), "{parked}");
}

#[test]
fn a_sources_transforms_reshape_route_and_drop_typed_rows_before_the_avro_converter() {
    const ROWS: u64 = 12;
    let registry = kafka_harness::registry::shared();
    let now = now_secs();
    let fake = FakeSnow::start(FakeOptions { frozen_at: Some(now), ..Default::default() }).unwrap();
    let ids = fake.shared().seed("incident", ROWS, now - 3600, 1800);
    fake.clock().advance(5);
    fake.shared().store().set_dictionary("incident", &dictionary(), None, now);
    let (name, topic) = (unique("srcsmt"), unique("srcsmt"));
    let routed = format!("{topic}-shaped");
    let dir = work_dir("registry-source-transforms");
    let config = avro_source(
        &fake,
        &name,
        &topic,
        &[
            ("transforms", "keep,origin,day,route,inactive"),
            ("transforms.keep.type", "org.apache.kafka.connect.transforms.ReplaceField$Value"),
            ("transforms.keep.include", "sys_id,number,priority,opened_at,active"),
            ("transforms.origin.type", "org.apache.kafka.connect.transforms.InsertField$Value"),
            ("transforms.origin.static.field", "origin"),
            ("transforms.origin.static.value", "servicenow"),
            ("transforms.day.type", "org.apache.kafka.connect.transforms.TimestampConverter$Value"),
            ("transforms.day.field", "opened_at"),
            ("transforms.day.target.type", "string"),
            ("transforms.day.format", "yyyy-MM-dd"),
            ("transforms.route.type", "org.apache.kafka.connect.transforms.RegexRouter"),
            ("transforms.route.regex", "(.*)"),
            ("transforms.route.replacement", "$1-shaped"),
            ("transforms.inactive.type", "org.apache.kafka.connect.transforms.Filter"),
            ("transforms.inactive.predicate", "never"),
            ("transforms.inactive.negate", "true"),
            ("predicates", "never"),
            ("predicates.never.type", "org.apache.kafka.connect.transforms.predicates.TopicNameMatches"),
            ("predicates.never.pattern", ".*-shaped"),
        ],
    );
    // The Filter runs on every record whose topic does NOT end in -shaped: after the router,
    // none, so every row arrives; it proves the predicate sees the routed topic.
    let runner = Runner::start(&dir, "run", &[&connector_file(&dir, &name, &config)]);
    let records = registry_consume(&routed, &registry.url(), ROWS as usize, "avro");
    let log = runner.stop();
    let records = records.unwrap_or_else(|e| panic!("{e}\nthe runner's log:\n{}", support::tail(&log, 30)));
    let row = fake.shared().store().table("incident").unwrap().get(&ids[0]).cloned().unwrap();
    let v = &records.iter().find(|r| r["key"] == ids[0].as_str()).unwrap()["value"];
    let mut fields: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    fields.sort_unstable();
    assert_eq!(fields, ["active", "number", "opened_at", "origin", "priority", "sys_id"], "{v}");
    assert_eq!(v["origin"], "servicenow");
    assert_eq!(v["opened_at"].as_str(), row["opened_at"].as_str().map(|t| &t[..10]), "a timestamp turned into its day");
    let (status, subjects) = registry.get("/apis/ccompat/v7/subjects").unwrap();
    assert_eq!(status, 200);
    assert!(subjects.contains(&format!("{routed}-value")), "the transformed schema registered under the routed topic: {subjects}");
}

#[test]
fn the_registry_is_reached_through_the_connectors_proxy_and_the_instance_on_its_no_proxy_list_directly() {
    const ROWS: u64 = 10;
    const PROXY_PASSWORD: &str = "Egress-Registry-Pw-8";
    let registry = kafka_harness::registry::shared();
    let direct = registry.url();
    // A name only the proxy resolves: the registry is reachable through it alone.
    let proxied = direct.replace("127.0.0.1", "registry.snow.test");
    let authority = proxied.trim_start_matches("http://").split('/').next().unwrap().to_string();
    let proxy = support::forward_proxy::ForwardProxy::start("egress", PROXY_PASSWORD, &[("registry.snow.test", "127.0.0.1")]);
    let (fake, ids, _) = costed_incidents(ROWS, ROWS);
    let (name, topic) = (unique("proxreg"), unique("proxreg"));
    let dir = work_dir("registry-proxied");
    let proxy_url = proxy.url();
    let config = avro_source(
        &fake,
        &name,
        &topic,
        &[
            ("value.converter.schema.registry.url", &proxied),
            ("snow.proxy.url", &proxy_url),
            ("snow.proxy.username", "egress"),
            ("snow.proxy.password", "${env:E2E_REGISTRY_PROXY_PASSWORD}"),
            ("snow.proxy.no.proxy", "127.0.0.1"),
        ],
    );
    let file = connector_file(&dir, &name, &config);
    let runner = Runner::spawn(&dir, "run", &[&file], support::DEFAULT_LOG, &[("E2E_REGISTRY_PROXY_PASSWORD", PROXY_PASSWORD)]);
    let records = avro_consume(&topic, &direct, ROWS as usize);
    let log = runner.stop();
    let records = records.unwrap_or_else(|e| panic!("{e}\nthe runner's log:\n{}", support::tail(&log, 30)));
    assert_eq!(records.len(), ids.len(), "every row, its schema registered through the proxy");
    let asked = proxy.asked();
    assert!(asked.iter().any(|a| a.method == "POST"), "the schema was registered through the proxy: {asked:?}");
    assert!(asked.iter().all(|a| a.target == authority && a.authorized), "only the registry, always with the credentials: {asked:?}");
    assert!(!fake.journal().entries.is_empty(), "the instance (on the no-proxy list) was asked directly");
    assert!(!log.contains(PROXY_PASSWORD));
}
