//! Kafka failing under a source: the broker stopped in the middle of a backfill and started again
//! (nothing lost, the stored offset never passes what Kafka acknowledged, the status says what the
//! table waits for), and a record the broker or the client always refuses (the table is parked
//! naming the record, after a bounded number of attempts).

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use fake_snow::{FakeSnow, Fault, FaultAction};
use kafka_harness::KafkaBroker;
use serde_json::Value;
use support::kafka::{Read, create_topic_with, read_until};
use support::{Runner, connector_file, now_secs, tail, unique, wait_until, work_dir};

const USER: &str = "kafka-failures-user";
const PASSWORD: &str = "Kf-Pw-5150";

fn config(fake: &FakeSnow, bootstrap: &str, name: &str, topic: &str, extra: &[(&str, &str)]) -> BTreeMap<String, String> {
    let credentials = [("snow.auth.username", USER), ("snow.auth.password", PASSWORD), ("kafka.bootstrap.servers", bootstrap)];
    let mut c = support::source_entries(&fake.url(), name, topic, &["incident"], &credentials);
    c.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    c
}

/// The stored position of the only table of `connector`, as (timestamp text, sys_id).
fn stored(dir: &Path, connector: &str) -> Option<(String, String)> {
    let file: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("offsets.json")).ok()?).ok()?;
    let (_, position) = file["offsets"][connector].as_object()?.iter().next()?;
    let p: Value = serde_json::from_str(position.as_str()?).ok()?;
    Some((p["ts"].as_str()?.to_string(), p["id"].as_str()?.to_string()))
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

/// How long the broker stays down (`SNOW_TEST_OUTAGE_SECONDS` to measure other outages).
fn outage() -> Duration {
    Duration::from_secs(support::sized("SNOW_TEST_OUTAGE_SECONDS", 8))
}

#[test]
fn a_broker_stopped_mid_backfill_loses_nothing_and_the_stored_offset_never_passes_an_acknowledgement() {
    let mut broker = KafkaBroker::start().unwrap();
    let bootstrap = broker.bootstrap().to_string();
    let now = now_secs();
    let fake = support::fake_with_user(USER, PASSWORD, Some(now));
    let ids: BTreeSet<String> = fake.shared().seed("incident", 60_000, now - 86_400, 80_000).into_iter().collect();
    // Slow pages, so that the outage lands in the middle of the backfill.
    fake.add_fault(Fault::always(FaultAction::Latency { ms: 40 }).on_method("GET").on_path("/api/now/table/incident"));
    let (name, topic) = (unique("outage"), unique("outage"));
    // The broker stamps each record when it appends it: what was acknowledged before the outage
    // is what it appended before the outage.
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(create_topic_with(&bootstrap, &topic, 1, &[("message.timestamp.type", "LogAppendTime")]));
    let dir = work_dir("outage");
    let file = connector_file(&dir, &name, &config(&fake, &bootstrap, &name, &topic, &[("snow.batch.size", "500")]));
    let mut runner = Runner::start_with_args(&dir, "run", &[&file], &["--status-listen", "127.0.0.1:0"]);
    let addr = support::status_address(&mut runner);
    wait_until("offsets stored by the backfill", Duration::from_secs(120), || stored(&dir, &name));

    broker.kill();
    let down_at = now_ms();
    let down = Instant::now();
    let unit = wait_until("the table waiting for Kafka in /status", Duration::from_secs(30), || {
        support::unit_status(&addr, "incident").filter(|u| u["state"] == "waiting")
    });
    let message = unit["message"].as_str().unwrap().to_string();
    assert!(message.contains("waiting for Kafka to acknowledge") && message.contains("stored offset stays"), "{message}");
    // The pipeline fills up and stops the polling: exactly the stated number of polls is out.
    let gauge = format!("snow_source_unacknowledged_polls{{connector=\"{name}\",table=\"incident\"}}");
    let unacknowledged =
        wait_until("a full pipeline", Duration::from_secs(30), || support::metric(&addr, &gauge).filter(|n| *n >= 4.0)) as usize;
    assert_eq!(unacknowledged, snow_runtime::source::pipeline::MAX_UNACKNOWLEDGED, "polls produced and not acknowledged at most");
    let during = stored(&dir, &name).unwrap();
    std::thread::sleep(outage().saturating_sub(down.elapsed())); // the outage itself: a fault's duration, not a synchronisation
    assert_eq!(stored(&dir, &name).unwrap(), during, "no offset is stored while Kafka acknowledges nothing");
    assert!(down.elapsed() >= outage());

    broker.restart().unwrap();
    let up = Instant::now();
    wait_until("an offset stored after the restart", Duration::from_secs(120), || (stored(&dir, &name).unwrap() != during).then_some(()));
    let resumed = up.elapsed();
    let records =
        read_until(&bootstrap, &topic, Duration::from_secs(300), |r| r.iter().map(|r| &r.key).collect::<BTreeSet<_>>().len() >= ids.len());
    let finished = up.elapsed();
    let unit = wait_until("running again", Duration::from_secs(30), || {
        support::unit_status(&addr, "incident").filter(|u| u["state"] == "running")
    });
    let log = runner.stop();
    eprintln!(
        "outage {:?}: the first offset after the restart was stored {} ms after the broker was back; the backfill finished {} ms after it",
        outage(),
        resumed.as_millis(),
        finished.as_millis()
    );

    let keys: BTreeSet<String> = records.iter().map(|r| r.key.clone()).collect();
    assert_eq!(keys, ids, "nothing lost; log:\n{}", tail(&log, 30));
    // Preconditions: the outage really landed in the middle, after data flowed.
    let before: Vec<&Read> = records.iter().filter(|r| r.timestamp_ms.unwrap() < down_at).collect();
    assert!(!before.is_empty() && before.len() < ids.len(), "Kafka held some but not all rows before the outage: {}", before.len());
    // Every row at or before the offset stored during the outage had been appended before it.
    let stamps: BTreeMap<String, String> =
        fake.fields("incident", ["sys_id", "sys_updated_on"]).into_iter().map(|[id, at]| (id, at)).collect();
    let acknowledged: BTreeSet<&str> = before.iter().map(|r| r.key.as_str()).collect();
    let covered: Vec<&String> =
        stamps.iter().filter(|(id, ts)| (ts.as_str(), id.as_str()) <= (during.0.as_str(), during.1.as_str())).map(|(id, _)| id).collect();
    assert!(!covered.is_empty());
    let unacknowledged: Vec<&&String> = covered.iter().filter(|id| !acknowledged.contains(id.as_str())).collect();
    assert!(unacknowledged.is_empty(), "the stored offset {during:?} passed {} rows Kafka had not acknowledged", unacknowledged.len());
    assert!(unit["message"].is_null(), "{unit}");
    assert!(log.contains("Kafka acknowledges again after"), "the recovery is logged");
}

/// A row of incident shape at `ts` whose description alone is `size` bytes of text that does not
/// compress (the broker's limit applies to the compressed batch).
fn huge_row(fake: &FakeSnow, ts: i64, size: usize) -> String {
    let mut row = fake_snow::seed::incident(999_999, ts, &fake.url());
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let text: String = (0..size)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from(b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"[(x % 62) as usize])
        })
        .collect();
    row.insert("description".into(), Value::String(text));
    let row = fake.shared().store().insert("incident", row, ts, "admin");
    row["sys_id"].as_str().unwrap().to_string()
}

#[test]
fn a_record_kafka_always_refuses_parks_the_table_naming_it_after_a_bounded_number_of_attempts() {
    let now = now_secs();
    let fake = support::fake_with_user(USER, PASSWORD, Some(now));
    let early: BTreeSet<String> = fake.shared().seed("incident", 1_000, now - 3_000, 1_000).into_iter().collect();
    // 3 MB: above librdkafka's message.max.bytes (1,000,000) and, compressed, the broker's (1,048,588).
    let big = huge_row(&fake, now - 1_500, 3_000_000);
    fake.shared().seed("incident", 1_000, now - 1_000, 500);
    let bootstrap = kafka_harness::shared().bootstrap();
    let dir = work_dir("refused");
    // The client refuses it at once; with the client's limit raised, the broker refuses it.
    let cases = [("client", vec![]), ("broker", vec![("kafka.producer.message.max.bytes", "5000000")])];
    let mut runs = Vec::new();
    for (label, extra) in &cases {
        let (name, topic) = (unique(&format!("refused-{label}")), unique("refused"));
        let mut c = vec![("snow.batch.size", "200"), ("component.trap.budget", "3")];
        c.extend(extra.iter().copied());
        let file = connector_file(&dir, &name, &config(&fake, bootstrap, &name, &topic, &c));
        runs.push((label, name, topic, file));
    }
    let files: Vec<&Path> = runs.iter().map(|(_, _, _, f)| f.as_path()).collect();
    let mut runner = Runner::start_with_args(&dir, "run", &files, &["--status-listen", "127.0.0.1:0"]);
    let addr = support::status_address(&mut runner);
    wait_until("both tables parked", Duration::from_secs(180), || (runner.log().matches("unit parked").count() >= 2).then_some(()));
    let status: Value = serde_json::from_str(&support::http_get(&addr, "/status").1).unwrap();
    let metrics = support::http_get(&addr, "/metrics").1;
    let log = runner.stop();
    for (label, name, topic, _) in &runs {
        let unit = status["units"].as_array().unwrap().iter().find(|u| u["connector"] == name.as_str()).unwrap();
        assert_eq!(unit["state"], "parked", "{label}: {unit}");
        let message = unit["message"].as_str().unwrap();
        for part in [format!("table incident: Kafka refused record {big}"), "bytes".to_string(), "refused 3 times in a row".to_string()] {
            assert!(message.contains(&part), "{label}: {part:?} not in {message}");
        }
        let size: usize = message.split(&format!("record {big} (")).nth(1).and_then(|r| r.split(' ').next()).unwrap().parse().unwrap();
        assert!(size > 3_000_000, "{label}: the record's size as produced: {size}");
        let refusals = format!("snow_source_kafka_refusals_total{{connector=\"{name}\",table=\"incident\"}} 3");
        assert!(metrics.lines().any(|l| l == refusals), "{label}: exactly three attempts: {refusals}\n{metrics}");
        let records = read_until(bootstrap, topic, Duration::from_secs(60), |r| {
            r.iter().map(|r| &r.key).collect::<BTreeSet<_>>().len() >= early.len()
        });
        let keys: BTreeSet<String> = records.iter().map(|r| r.key.clone()).collect();
        assert!(early.is_subset(&keys), "{label}: every row before the refused one arrived");
        assert!(!keys.contains(&big), "{label}");
    }
    assert!(!log.contains(PASSWORD));
}
