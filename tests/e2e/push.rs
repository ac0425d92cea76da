//! Push (ADR 0032): the fake runs the after-commit business rule and posts a signed notification
//! after each committed write; the standalone run's `snow.push.listen` takes it and wakes the
//! table's sweep. With a 60 s poll interval every change reaches Kafka long before the next timed
//! sweep, also when a fifth of the notifications are lost and some come twice; nothing is emitted
//! twice; forged, stale, oversized or malformed requests are refused with 4xx and counted, and a
//! flood neither crashes the host nor storms the instance. In a fleet, a worker that does not run
//! the table takes the notification on its REST listener and the owner is woken through the
//! fleet's wake topic.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read as _, Write as _};
use std::time::{Duration, Instant};

use fake_snow::FakeSnow;
use fake_snow::push::PushRule;
use support::kafka::{create_topic_with, read_until};
use support::{DEFAULT_LOG, Runner, connector_file, now_secs, status_address, sweep_starts, tail, unique, work_dir};

const USER: &str = "push-user";
const PASSWORD: &str = "Push-Secret-Pw-5";
const SECRET: &str = "push-e2e-shared-secret-0123456789";

/// `POST path` with `headers` and `body` to `addr`: the status code.
fn post(addr: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> u16 {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut request = format!("POST {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n", body.len());
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    // A body past the endpoint's cap is refused from its Content-Length, unread: not sending it
    // keeps the refusal from being lost to a reset of a socket closed with unread bytes.
    if body.len() <= snow_runtime::push::notification::MAX_BODY_BYTES {
        stream.write_all(body).unwrap();
    }
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0)
}

/// A notification for `table` stamped now, signed with `secret` at `at` (Unix seconds).
fn signed(secret: &str, at: i64, body: &str) -> (String, String) {
    (at.to_string(), snow_runtime::push::signature::sign(secret.as_bytes(), at, body.as_bytes()))
}

/// The sum of the `/metrics` series `name` whose labels include each of `labels` (`k="v"`).
fn metric_sum(addr: &str, name: &str, labels: &[&str]) -> f64 {
    let body = support::http_get(addr, "/metrics").1;
    body.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) && labels.iter().all(|label| l.contains(label)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn millis_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

fn version_of(fake: &FakeSnow, id: &str) -> (String, String) {
    let row = fake.rows("incident").into_iter().find(|r| r["sys_id"] == id).unwrap();
    (id.to_string(), row["sys_mod_count"].as_str().unwrap().to_string())
}

#[test]
fn notifications_bring_changes_long_before_the_poll_and_bad_ones_are_refused() {
    let fake = support::fake_with_user(USER, PASSWORD, None);
    let ids = fake.shared().seed("incident", 200, now_secs() - 600, 200);
    let (name, topic) = (unique("push"), unique("push"));
    let bootstrap = kafka_harness::shared().bootstrap();
    // The broker stamps each record when it appends it: "in Kafka" as the consumer sees it.
    tokio::runtime::Runtime::new().unwrap().block_on(create_topic_with(
        bootstrap,
        &topic,
        1,
        &[("message.timestamp.type", "LogAppendTime")],
    ));
    let dir = work_dir("push");
    let config = support::source_entries(
        &fake.url(),
        &name,
        &topic,
        &["incident"],
        &[
            ("snow.auth.username", USER),
            ("snow.auth.password", PASSWORD),
            ("snow.poll.interval.ms", "60000"),
            ("snow.table.incident.deletes", "true"),
            ("snow.push.secret", "${env:E2E_PUSH_SECRET}"),
            ("snow.push.listen", "127.0.0.1:0"),
            ("snow.push.max.per.second", "50"),
        ],
    );
    let file = connector_file(&dir, &name, &config);
    let mut runner =
        Runner::spawn_with_args(&dir, "push", &[&file], DEFAULT_LOG, &[("E2E_PUSH_SECRET", SECRET)], &["--status-listen", "127.0.0.1:0"]);
    let log = runner.wait_for_log("push endpoint on http://", Duration::from_secs(120));
    let push_addr = log.split("push endpoint on http://").nth(1).and_then(|r| r.split('/').next()).unwrap().to_string();
    let status = status_address(&mut runner);
    let path = format!("/snow/push/{name}");
    read_until(bootstrap, &topic, Duration::from_secs(120), |r| r.len() >= 200);

    // The business rule: 20 ms after each commit, a fifth lost, a tenth posted twice.
    let rule = |loss: f64| PushRule {
        url: format!("http://{push_addr}{path}"),
        secret: SECRET.as_bytes().to_vec(),
        delay_ms: 20,
        loss,
        duplicate: 0.1,
        tables: vec![],
    };
    let pusher = fake.shared().set_push_rule(Some(rule(0.2))).unwrap();
    let sweeps_before = sweep_starts(&fake, "incident");
    let started = Instant::now();
    let mut changed: Vec<((String, String), i64)> = Vec::new();
    let mut change = |id: &String, i: usize| {
        let mut changes = serde_json::Map::new();
        changes.insert("state".into(), serde_json::Value::String(format!("push-{i}")));
        let at = millis_now();
        fake.shared().update_rows("incident", std::slice::from_ref(id), &changes);
        changed.push((version_of(&fake, id), at));
    };
    for (i, id) in ids.iter().take(150).enumerate() {
        change(id, i);
        std::thread::sleep(Duration::from_millis(40)); // the writer's pace, not a synchronisation
    }
    // The last change's notification is not lost, so the test does not rest on chance.
    let last_rule = fake.shared().set_push_rule(Some(rule(0.0))).unwrap();
    change(&ids[150], 150);
    // Deletes too: the rule's notification carries the time of the delete.
    let mut deleted: Vec<(String, i64)> = Vec::new();
    for id in &ids[160..165] {
        let at = millis_now();
        assert_eq!(fake.shared().delete_rows("incident", std::slice::from_ref(id)), 1);
        deleted.push((id.clone(), at));
        std::thread::sleep(Duration::from_millis(40)); // the writer's pace, not a synchronisation
    }
    let is_delete = |r: &support::kafka::Read| r.headers.get("snow.source.operation").map(String::as_str) == Some("DELETE");
    let want: BTreeSet<(String, String)> = changed.iter().map(|(v, _)| v.clone()).collect();
    let records = read_until(bootstrap, &topic, Duration::from_secs(45), |r| {
        let have: BTreeSet<_> = r.iter().map(|r| r.version()).collect();
        let gone: BTreeSet<&str> = r.iter().filter(|r| is_delete(r)).map(|r| r.key.as_str()).collect();
        want.is_subset(&have) && deleted.iter().all(|(id, _)| gone.contains(id.as_str()))
    });
    let writing = started.elapsed();
    let sweeps = sweep_starts(&fake, "incident") - sweeps_before;
    let counts = support::wait_until("the rule's posts", Duration::from_secs(30), || {
        let c = pusher.counts();
        (c.posted >= c.writes - c.lost).then_some(c)
    });

    // Every change arrived, each well before the next timed sweep could have brought it.
    let appended: BTreeMap<(String, String), i64> = records.iter().map(|r| (r.version(), r.timestamp_ms.unwrap())).collect();
    let mut latencies: Vec<i64> = Vec::new();
    for (version, at) in &changed {
        let latency = appended[version] - at;
        assert!(latency < 20_000, "{version:?} reached Kafka {latency} ms after its change: not through a notification");
        latencies.push(latency);
    }
    latencies.sort_unstable();
    let pct = |p: usize| latencies[(latencies.len() * p / 100).min(latencies.len() - 1)];
    let mut delete_latencies = Vec::new();
    for (id, at) in &deleted {
        let tombstone = records.iter().find(|r| is_delete(r) && r.key == *id).unwrap();
        let latency = tombstone.timestamp_ms.unwrap() - at;
        assert!(latency < 20_000, "the delete of {id} reached Kafka {latency} ms after it: not through its notification");
        delete_latencies.push(latency);
    }
    assert!(counts.lost >= 10 && counts.posted > counts.writes - counts.lost, "notifications were lost and repeated: {counts:?}");
    assert_eq!(counts.failed + last_rule.counts().failed, 0, "every notification posted was accepted");
    // Repeated and reordered notifications emit nothing twice.
    let mut seen = BTreeSet::new();
    for r in &records {
        assert!(seen.insert(r.version()), "{:?} written twice", r.version());
    }
    // Coalesced: at most one sweep per 500 ms (snow.push.min.interval.ms), far fewer than posts.
    let most = writing.as_millis() as usize / 500 + 2;
    if sweeps > most {
        // What the sweeps read, to tell a storm's cause on failure: the latest 60 reads.
        let journal = fake.journal();
        let reads: Vec<_> = journal.entries.iter().filter(|e| e.path == "/api/now/table/incident").collect();
        for e in &reads[reads.len().saturating_sub(60)..] {
            eprintln!("{} ms: {:?} rows for {:?}", e.at_ms, e.returned, e.query);
        }
    }
    assert!(sweeps <= most && sweeps < counts.posted as usize, "{sweeps} sweeps for {} posts in {writing:?}", counts.posted);

    // Refusals: 4xx, counted by reason, nothing woken.
    let body = r#"{"table":"incident","sys_id":"x","sys_updated_on":"2026-01-01 00:00:00"}"#;
    let now = now_secs();
    let (ts, sig) = signed(SECRET, now, body);
    let headers = |ts: &str, sig: &str| vec![("X-Snow-Push-Timestamp", ts.to_string()), ("X-Snow-Push-Signature", sig.to_string())];
    let send = |path: &str, headers: Vec<(&str, String)>, body: &[u8]| {
        let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        post(&push_addr, path, &headers, body)
    };
    let (_, forged) = signed("not-the-shared-secret-at-all", now, body);
    assert_eq!(send(&path, headers(&ts, &forged), body.as_bytes()), 401, "forged");
    let (old_ts, old_sig) = signed(SECRET, now - 3600, body);
    assert_eq!(send(&path, headers(&old_ts, &old_sig), body.as_bytes()), 401, "replayed an hour later");
    assert_eq!(send(&path, vec![], body.as_bytes()), 401, "unsigned");
    let huge = format!("[{}]", vec![body; 2000].join(","));
    let (hts, hsig) = signed(SECRET, now, &huge);
    assert_eq!(send(&path, headers(&hts, &hsig), huge.as_bytes()), 413, "oversized");
    let (jts, jsig) = signed(SECRET, now, "not json");
    assert_eq!(send(&path, headers(&jts, &jsig), b"not json"), 400, "malformed");
    let other = r#"{"table":"problem","sys_updated_on":"2026-01-01 00:00:00"}"#;
    let (ots, osig) = signed(SECRET, now, other);
    assert_eq!(send(&path, headers(&ots, &osig), other.as_bytes()), 404, "a table the connector does not read");
    assert_eq!(send("/snow/push/someone-else", headers(&ts, &sig), body.as_bytes()), 401, "another connector: as a bad signature");
    let refused = |reason: &str| metric_sum(&status, "snow_push_refused_total", &[&format!("reason=\"{reason}\"")]);
    for reason in ["bad_signature", "stale", "unsigned", "too_large", "malformed", "unknown_table", "unknown_connector"] {
        assert_eq!(refused(reason), 1.0, "{reason} counted once");
    }

    // A flood of valid notifications: refused past the rate, coalesced, the host stays up.
    let accepted_before = metric_sum(&status, "snow_push_accepted_total", &[]);
    let sweeps_before = sweep_starts(&fake, "incident");
    let flood_started = Instant::now();
    let answers: Vec<u16> = (0..500).map(|_| send(&path, headers(&ts, &sig), body.as_bytes())).collect();
    let flood = flood_started.elapsed();
    let (ok, limited) = (answers.iter().filter(|s| **s == 202).count(), answers.iter().filter(|s| **s == 429).count());
    assert_eq!(ok + limited, 500, "every answer is 202 or 429: {answers:?}");
    assert!(limited > 0 && ok >= 50, "the rate (50 a second) held: {ok} accepted, {limited} refused in {flood:?}");
    assert_eq!(metric_sum(&status, "snow_push_accepted_total", &[]) - accepted_before, ok as f64);
    assert_eq!(refused("rate_limited"), limited as f64);
    // The flood's sweeps: one per min.interval at most (plus the one in flight when it ended).
    let flood_sweeps = support::wait_until("the flood's last sweep", Duration::from_secs(30), || {
        let n = sweep_starts(&fake, "incident") - sweeps_before;
        (n >= 1).then_some(n)
    });
    assert!(flood_sweeps <= flood.as_millis() as usize / 500 + 2, "{flood_sweeps} sweeps for a flood of {flood:?}");
    let log = runner.stop();
    assert!(!log.contains(SECRET), "the secret never reaches the log");
    eprintln!(
        "push: {} changes, latency p50 {} ms p99 {} ms max {} ms; deletes {delete_latencies:?} ms; {} notifications posted ({} lost, {} writes); {sweeps} sweeps; \
         flood: {ok} accepted, {limited} refused, {flood_sweeps} sweeps in {flood:?}; log tail:\n{}",
        changed.len(),
        pct(50),
        pct(99),
        latencies.last().unwrap(),
        counts.posted,
        counts.lost,
        counts.writes,
        tail(&log, 3)
    );
}

#[test]
fn in_a_fleet_any_worker_takes_the_notification_and_the_tables_owner_sweeps() {
    use serde_json::json;
    use support::fleet::{curl, start_worker, tasks_in, wait_status, worker_properties};

    let fake = support::fake_with_user(USER, PASSWORD, None);
    let ids = fake.shared().seed("incident", 100, now_secs() - 600, 100);
    let dir = work_dir("push-fleet");
    let group = unique("push-fleet");
    let env = [("SNOW_PUSH_PASSWORD", PASSWORD), ("SNOW_PUSH_SECRET", SECRET)];
    let status_listen = [("status.listen", "127.0.0.1:0")];
    let specs = [worker_properties(&dir, "w1", &group, &status_listen), worker_properties(&dir, "w2", &group, &status_listen)];
    let mut workers: Vec<Runner> = specs.iter().enumerate().map(|(i, s)| start_worker(&dir, &format!("w{}", i + 1), s, &env)).collect();
    let status_of: Vec<String> = workers.iter_mut().map(status_address).collect();
    let (name, topic) = (unique("push-fleet"), unique("push-fleet"));
    let mut config = support::source_entries(
        &fake.url(),
        &name,
        &topic,
        &["incident"],
        &[
            ("snow.auth.username", USER),
            ("snow.auth.password", "${env:SNOW_PUSH_PASSWORD}"),
            ("snow.poll.interval.ms", "60000"),
            ("snow.push.secret", "${env:SNOW_PUSH_SECRET}"),
        ],
    );
    for key in ["offset.storage.file.filename", "kafka.bootstrap.servers", "component.trusted.keys", "name"] {
        config.remove(key);
    }
    // A connector configuration may not open a listener on the workers.
    let mut listening = config.clone();
    listening.insert("snow.push.listen".into(), "0.0.0.0:9999".into());
    let refused = curl(specs[0].port, "POST", "/connectors", Some(&json!({ "name": name, "config": listening })));
    assert_eq!(refused.status, 400, "{}", refused.text);
    assert!(refused.text.contains("snow.push.listen"), "the key is named: {}", refused.text);
    // Nor store the shared secret itself in the fleet's configuration topic.
    let mut literal = config.clone();
    literal.insert("snow.push.secret".into(), SECRET.into());
    let refused = curl(specs[0].port, "POST", "/connectors", Some(&json!({ "name": name, "config": literal })));
    assert_eq!(refused.status, 400, "{}", refused.text);
    assert!(refused.text.contains("snow.push.secret: must be given as a provider reference"), "{}", refused.text);
    assert!(!refused.text.contains(SECRET), "the secret is not echoed: {}", refused.text);
    let created = curl(specs[0].port, "POST", "/connectors", Some(&json!({ "name": name, "config": config })));
    assert_eq!(created.status, 201, "{}", created.text);
    let bootstrap = kafka_harness::shared().bootstrap();
    read_until(bootstrap, &topic, Duration::from_secs(120), |r| r.len() >= 100);
    let status = wait_status(specs[0].port, &name, Duration::from_secs(60), "running", |s| tasks_in(s, "RUNNING") == 1);
    let owner = status["tasks"][0]["worker_id"].as_str().unwrap().to_string();
    let other_index = specs.iter().position(|s| format!("127.0.0.1:{}", s.port) != owner).unwrap();
    let other = &specs[other_index];

    // The business rule posts to the worker that does not run the table.
    let pusher = fake
        .shared()
        .set_push_rule(Some(PushRule {
            url: format!("http://127.0.0.1:{}/snow/push/{name}", other.port),
            secret: SECRET.as_bytes().to_vec(),
            delay_ms: 0,
            loss: 0.0,
            duplicate: 0.0,
            tables: vec![],
        }))
        .unwrap();
    let mut changed: Vec<((String, String), i64)> = Vec::new();
    for (i, id) in ids.iter().take(20).enumerate() {
        let mut changes = serde_json::Map::new();
        changes.insert("state".into(), serde_json::Value::String(format!("fleet-{i}")));
        let at = millis_now();
        fake.shared().update_rows("incident", std::slice::from_ref(id), &changes);
        changed.push((version_of(&fake, id), at));
        std::thread::sleep(Duration::from_millis(100)); // the writer's pace, not a synchronisation
    }
    let want: BTreeSet<(String, String)> = changed.iter().map(|(v, _)| v.clone()).collect();
    let records = read_until(bootstrap, &topic, Duration::from_secs(45), |r| {
        let have: BTreeSet<_> = r.iter().map(|r| r.version()).collect();
        want.is_subset(&have)
    });
    let now = millis_now();
    for (version, at) in &changed {
        let record = records.iter().find(|r| r.version() == *version).unwrap();
        // The topic's timestamps are the producer's here: the record was made this long after the change.
        let latency = record.timestamp_ms.unwrap_or(now) - at;
        assert!(latency < 20_000, "{version:?} reached Kafka {latency} ms after its change: not woken through the fleet");
    }
    let counts = pusher.counts();
    assert!(counts.posted >= 20 && counts.failed == 0, "every notification was accepted by the other worker: {counts:?}");
    let accepted = metric_sum(&status_of[other_index], "snow_push_accepted_total", &[&format!("connector=\"{name}\"")]);
    assert_eq!(accepted, counts.posted as f64, "the worker that does not run the table took them all");
    let opened = workers[1 - other_index].log().matches("opened at cursor").count();
    assert_eq!(opened, 1, "the owner's unit ran throughout: the changes came by its woken sweeps, not by a restart");
    for worker in workers {
        worker.stop();
    }
}
