//! The sandbox, tried by a hostile component in the real host: it cannot reach a host other than
//! its configured instance (and requests to the instance carry credentials it never saw), it
//! never sees the instance's session cookies, it cannot produce to a topic its configuration does
//! not name, it cannot leak a secret in any encoding through logs, status or metrics, and it
//! cannot make the host hold an unbounded request body or create unbounded metric series.

use crate::support;

use std::time::Duration;

use fake_snow::{FakeOptions, FakeSnow};
use support::kafka::read_until;
use support::{Runner, connector_file, entries, unique, work_dir};

fn rogue_config(allowed: &FakeSnow, target: &str, name: &str) -> std::collections::BTreeMap<String, String> {
    entries(&[
        ("name", name),
        ("component.path", support::signed(guest_artifacts::ROGUE_GUEST)),
        support::TRUSTED_KEYS,
        ("kafka.bootstrap.servers", "127.0.0.1:9"),
        ("offset.storage.file.filename", "offsets.json"),
        ("snow.instance.url", &allowed.url()),
        ("snow.auth.username", "gatekeeper"),
        ("snow.auth.password", "gate-Pw-1"),
        ("snow.rogue.url", target),
    ])
}

#[test]
fn a_request_to_another_host_is_refused_and_the_instance_is_reached_with_host_credentials() {
    let allowed = FakeSnow::start(FakeOptions {
        users: vec![("gatekeeper".into(), "gate-Pw-1".into())],
        tables: vec!["incident".into()],
        ..Default::default()
    })
    .unwrap();
    let other = FakeSnow::start(FakeOptions::default()).unwrap();
    let dir = work_dir("gate");

    let target = format!("{}/api/now/table/incident", other.url());
    let name = unique("rogue");
    let file = connector_file(&dir, &name, &rogue_config(&allowed, &target, &name));
    let mut runner = Runner::start(&dir, "refused", &[&file]);
    let log = runner.wait_for_log("unit parked", Duration::from_secs(60));
    runner.kill();
    let (allowed_at, other_at) = (allowed.addr().to_string(), other.addr().to_string());
    assert!(
        log.contains(&format!("refused a guest request to http://{other_at}/api/now/table/incident: only http://{allowed_at} is allowed")),
        "the host logs the refusal:\n{log}"
    );
    assert!(log.contains(&format!("denied: GET /api/now/table/incident: the host refused a request to {other_at}: only the configured ServiceNow instance may be called")), "the guest got a clear error:\n{log}");
    assert!(other.journal().entries.is_empty(), "nothing reached the other host");

    let target = format!("{}/api/now/table/incident", allowed.url());
    let name = unique("rogue");
    let file = connector_file(&dir, &name, &rogue_config(&allowed, &target, &name));
    let mut runner = Runner::start(&dir, "allowed", &[&file]);
    let log = runner.wait_for_log("unit parked", Duration::from_secs(60));
    runner.kill();
    assert!(log.contains("reached it: status 404"), "the configured instance is reachable:\n{log}");
    let headers = log.split("reached it: status 404; headers: ").nth(1).and_then(|r| r.split_whitespace().next()).unwrap();
    assert!(headers.contains("date") && headers.contains("content-type"), "the guest sees the answer's headers: {headers}");
    assert!(!headers.contains("cookie"), "but never the session cookies the instance set: {headers}");
    let journal = allowed.journal();
    assert_eq!(journal.entries.len(), 1);
    assert!(journal.entries[0].status == 404, "the instance answered (with its Set-Cookie headers)");
    assert_eq!(journal.entries[0].auth, "basic:gatekeeper", "the host attached credentials the guest never had");
    assert!(!log.contains("gate-Pw-1"));
}

#[test]
fn a_component_that_traps_on_every_poll_is_parked_once_its_trap_budget_is_spent() {
    let allowed = FakeSnow::start(FakeOptions::default()).unwrap();
    let dir = work_dir("traps");
    let name = unique("trapper");
    let mut config = rogue_config(&allowed, "trap", &name);
    config.insert("component.trap.budget".into(), "3".into());
    let file = connector_file(&dir, &name, &config);
    let mut runner = Runner::start(&dir, "traps", &[&file]);
    let log = runner.wait_for_log("unit parked", Duration::from_secs(60));
    runner.kill();
    assert_eq!(log.matches("ERROR the component trapped in poll:").count(), 3, "three traps, each logged whole:\n{log}");
    let parked = log.lines().find(|l| l.contains("unit parked")).unwrap();
    assert!(parked.contains("trapped 3 times in a row without a successful call (component.trap.budget=3)"), "{parked}");
    assert!(parked.contains("wasm trap: wasm `unreachable` instruction executed"), "the trap itself is named: {parked}");
    assert_eq!(log.matches("reopening at the stored offset").count(), 2, "reopened after the first two traps only:\n{log}");
}

/// Runs the rogue with `extra` keys until it parks; returns its log, status entry and metrics.
fn run_rogue(label: &str, allowed: &FakeSnow, extra: &[(&str, &str)]) -> (String, serde_json::Value, String) {
    let dir = work_dir(label);
    let name = unique(label);
    let mut config = rogue_config(allowed, &format!("{}/api/now/table/incident", allowed.url()), &name);
    for (k, v) in extra {
        config.insert(k.to_string(), v.to_string());
    }
    let file = connector_file(&dir, &name, &config);
    let mut runner = Runner::start_with_args(&dir, "run", &[&file], &["--status-listen", "127.0.0.1:0"]);
    let addr = support::status_address(&mut runner);
    runner.wait_for_log("unit parked", Duration::from_secs(120));
    let unit = support::unit_status(&addr, "rogue").unwrap();
    let metrics = support::http_get(&addr, "/metrics").1;
    let status = support::http_get(&addr, "/status").1;
    let log = runner.stop();
    (format!("{log}\n--- status ---\n{status}"), unit, metrics)
}

#[test]
fn a_component_may_produce_only_to_the_topics_its_configuration_names() {
    let allowed = FakeSnow::start(FakeOptions::default()).unwrap();
    let (log, unit, metrics) = run_rogue("topic", &allowed, &[("snow.rogue.topic", "__consumer_offsets"), ("snow.tables", "incident")]);
    assert_eq!(unit["state"], "parked", "{unit}");
    let message = unit["message"].as_str().unwrap();
    assert!(
        message.contains("to topic \"__consumer_offsets\", which the connector's configuration does not name (it names: snow.incident)"),
        "{message}"
    );
    assert!(metrics.lines().any(|l| l.starts_with("snow_source_topic_refused_total{") && l.ends_with(" 1")), "counted:\n{metrics}");
    assert!(!metrics.contains("snow_source_records_total"), "nothing was produced");
    assert!(log.contains("nothing of the batch was produced"));

    // The same component producing to the topic its configuration names is let through.
    let topic = unique("rogue-topic");
    let dir = work_dir("topic-ok");
    let name = unique("topic-ok");
    let mut config = rogue_config(&allowed, "unused", &name);
    config.insert("kafka.bootstrap.servers".into(), kafka_harness::shared().bootstrap().into());
    for (k, v) in [("snow.tables", "incident"), ("snow.table.incident.topic", topic.as_str()), ("snow.rogue.topic", topic.as_str())] {
        config.insert(k.into(), v.into());
    }
    let file = connector_file(&dir, &name, &config);
    let runner = Runner::start(&dir, "run", &[&file]);
    let records = read_until(kafka_harness::shared().bootstrap(), &topic, Duration::from_secs(60), |r| !r.is_empty());
    runner.stop();
    assert_eq!(records[0].key, "rogue");
}

#[test]
fn a_secret_in_any_encoding_never_reaches_the_log_the_status_or_the_metrics() {
    let allowed = FakeSnow::start(FakeOptions::default()).unwrap();
    // A password with characters every encoding changes.
    let password = "Gate/Pw:é+1 \"q";
    let basic = snow_core::auth::basic::authorization("gatekeeper", password);
    let leaks = [
        password.to_string(),
        "Gate%2FPw%3A%C3%A9%2B1%20%22q".to_string(),
        "Gate%2fPw%3a%c3%a9%2b1%20%22q".to_string(),
        "Gate\\u002fPw\\u003a\\u00e9\\u002b1\\u0020\\u0022q".to_string(),
        "Gate\\/Pw:é+1 \\\"q".to_string(),
        snow_core::auth::basic::base64(password.as_bytes()),
        basic.trim_start_matches("Basic ").to_string(),
    ];
    let said = leaks.join(" ");
    let dir = work_dir("leak");
    let name = unique("leak");
    let mut config = rogue_config(&allowed, "unused", &name);
    config.insert("snow.auth.password".into(), "${env:ROGUE_PASSWORD}".into());
    config.insert("snow.rogue.say".into(), said.clone());
    // JSON keeps every backslash of the leaks as written (a properties file reads escapes).
    let file = support::connector_json(&dir, &name, &config);
    let mut runner = Runner::spawn_with_args(
        &dir,
        "run",
        &[&file],
        support::DEFAULT_LOG,
        &[("ROGUE_PASSWORD", password)],
        &["--status-listen", "127.0.0.1:0"],
    );
    let addr = support::status_address(&mut runner);
    runner.wait_for_log("unit parked", Duration::from_secs(60));
    let status = support::http_get(&addr, "/status").1;
    let metrics = support::http_get(&addr, "/metrics").1;
    let log = runner.stop();
    for (what, text) in [("log", &log), ("status", &status), ("metrics", &metrics)] {
        for leak in &leaks {
            assert!(!text.contains(leak.as_str()), "{what} carries {leak:?}:\n{text}");
        }
    }
    // The guest did say it, through every channel: the host scrubbed it each time.
    assert!(log.contains("rogue says ***") && log.contains("guest stderr: rogue prints ***"), "{log}");
    assert!(status.contains("rogue fails with ***"), "{status}");
    assert!(metrics.contains("rogue_said_total{connector="), "{metrics}");
}

#[test]
fn a_request_body_is_refused_as_soon_as_it_passes_the_cap() {
    let allowed = FakeSnow::start(FakeOptions::default()).unwrap();
    let gib = (1u64 << 30).to_string();
    let (log, unit, _) = run_rogue("bigbody", &allowed, &[("snow.rogue.post.bytes", &gib)]);
    let message = unit["message"].as_str().unwrap();
    let took: u64 = message.split("the host took ").nth(1).and_then(|r| r.split(' ').next()).unwrap().parse().unwrap();
    let cap = snow_runtime::outbound::MAX_REQUEST_BODY as u64;
    eprintln!("a 1 GiB request body: the host took {took} bytes ({:.2} MiB) before refusing it", took as f64 / 1048576.0);
    assert!(took >= cap && took <= cap + (4 << 20), "the host stopped taking the 1 GiB body right after its {cap}-byte cap: took {took}");
    assert!(log.contains("refused a guest request whose body passed"), "{log}");
    assert!(allowed.journal().entries.is_empty(), "the request never went out");
}

#[test]
fn the_metric_series_a_component_can_create_are_capped() {
    let allowed = FakeSnow::start(FakeOptions::default()).unwrap();
    let wanted = snow_runtime::metrics::GUEST_SERIES_PER_CONNECTOR + 5_000;
    let (log, _, metrics) = run_rogue("series", &allowed, &[("snow.rogue.series", &wanted.to_string())]);
    let series = metrics.lines().filter(|l| l.starts_with("rogue_series_total{")).count();
    assert!(series <= snow_runtime::metrics::GUEST_SERIES_PER_CONNECTOR, "{series} series");
    assert!(series > snow_runtime::metrics::GUEST_SERIES_PER_CONNECTOR - 100, "up to the cap: {series}");
    let dropped = metrics.lines().find(|l| l.starts_with("snow_guest_metric_series_dropped_total{")).unwrap();
    assert!(dropped.ends_with(" 5000") || dropped.split(' ').nth(1).unwrap().parse::<f64>().unwrap() >= 5000.0, "{dropped}");
    assert_eq!(log.matches("dropped a metric a guest reported").count(), 1, "logged once, then only counted");
}

#[test]
fn a_page_nested_a_million_levels_deep_is_a_clear_error_not_a_trap() {
    let now = support::now_secs();
    let fake = FakeSnow::start(FakeOptions { frozen_at: Some(now), ..Default::default() }).unwrap();
    let ids: std::collections::BTreeSet<String> = fake.shared().seed("incident", 50, now - 600, 100).into_iter().collect();
    let deep = format!(r#"{{"result":[{{"sys_id":"a","x":{}1{}}}]}}"#, "[".repeat(1_000_000), "]".repeat(1_000_000));
    let fault =
        fake_snow::Fault::always(fake_snow::FaultAction::ReplaceBody { body: deep }).on_method("GET").on_path("/api/now/table/incident");
    fake.add_fault(fault.times(2));
    let (name, topic) = (unique("deep"), unique("deep"));
    let dir = work_dir("deep");
    let config = entries(&[
        ("name", &name),
        ("component.path", support::signed(guest_artifacts::GUEST_SOURCE)),
        support::TRUSTED_KEYS,
        ("kafka.bootstrap.servers", kafka_harness::shared().bootstrap()),
        ("offset.storage.file.filename", "offsets.json"),
        ("snow.instance.url", &fake.url()),
        ("snow.auth.type", "none"),
        ("snow.tables", "incident"),
        ("snow.table.incident.topic", &topic),
        ("snow.startup.probe", "false"),
        ("snow.safety.lag.seconds", "2"),
    ]);
    let file = connector_file(&dir, &name, &config);
    let runner = Runner::start(&dir, "run", &[&file]);
    let records = read_until(kafka_harness::shared().bootstrap(), &topic, Duration::from_secs(120), |r| r.len() >= ids.len());
    let log = runner.stop();
    assert_eq!(records.iter().map(|r| r.key.clone()).collect::<std::collections::BTreeSet<_>>(), ids, "it recovers once the page is sane");
    assert!(log.contains("values nested deeper than 128 levels"), "the error says what is wrong:\n{}", support::tail(&log, 30));
    assert!(!log.contains("trapped"), "no trap:\n{}", support::tail(&log, 30));
}

/// Ten tables on an instance whose rate limit rule allows 50 API calls per 5 s window and answers
/// 429 without any header past it (500 an hour, scaled down in time).
fn rate_limited_instance() -> (FakeSnow, Vec<String>, Vec<String>) {
    let tables: Vec<String> = (0..10).map(|i| format!("u_budget_{i}")).collect();
    let fake =
        FakeSnow::start(FakeOptions { users: vec![("budget".into(), "budget-Pw-1".into())], tables: tables.clone(), ..Default::default() })
            .unwrap();
    let now = support::now_secs();
    let ids: Vec<String> = tables.iter().flat_map(|t| fake.shared().seed(t, 200, now - 86_400, 80_000)).collect();
    fake.shared().set_rate_limit(Some(fake_snow::rate_limit::RateLimit { requests: 50, window_ms: 5_000, headers: false }));
    (fake, tables, ids)
}

fn budget_source(
    fake: &FakeSnow,
    tables: &[String],
    name: &str,
    topic: &str,
    extra: &[(&str, &str)],
) -> std::collections::BTreeMap<String, String> {
    let tables: Vec<&str> = tables.iter().map(String::as_str).collect();
    let mut pairs = vec![("snow.auth.username", "budget"), ("snow.auth.password", "budget-Pw-1"), ("snow.batch.size", "50")];
    pairs.extend_from_slice(extra);
    support::source_entries(&fake.url(), name, topic, &tables, &pairs)
}

#[test]
fn ten_tables_within_a_request_budget_stay_under_the_instances_limit_lose_nothing_and_say_why_they_are_slow() {
    let (fake, tables, ids) = rate_limited_instance();
    let (name, topic) = (unique("budget"), unique("budget"));
    let dir = work_dir("budget");
    // 480 a minute: 8 at once, then 7.9 a second, so no 5 s window of the instance counts more than 48.
    let config = budget_source(
        &fake,
        &tables,
        &name,
        &topic,
        &[("snow.instance.requests.per.minute", "480"), ("snow.table.u_budget_0.priority", "40")],
    );
    let file = connector_file(&dir, &name, &config);
    let mut runner = Runner::start_with_args(&dir, "run", &[&file], &["--status-listen", "127.0.0.1:0"]);
    let addr = support::status_address(&mut runner);
    // While the tables want far more than the budget (each polls every 200 ms), a unit says so.
    let slowed = support::wait_until("a unit's status saying the budget slows it", Duration::from_secs(120), || {
        tables.iter().find_map(|t| {
            let status = support::unit_status_of(&addr, &name, t)?;
            let message = status["message"].as_str()?.to_string();
            message.contains("slowed by the instance's request budget").then_some(message)
        })
    });
    let records = read_until(kafka_harness::shared().bootstrap(), &topic, Duration::from_secs(240), |r| {
        r.iter().map(|x| x.key.as_str()).collect::<std::collections::BTreeSet<_>>().len() >= ids.len()
    });
    let requests: Vec<f64> = tables
        .iter()
        .map(|t| support::metric(&addr, &format!("snow_instance_requests_total{{connector=\"{name}\",table=\"{t}\"}}")).unwrap_or(0.0))
        .collect();
    let log = runner.stop();
    let keys: std::collections::BTreeSet<&str> = records.iter().map(|r| r.key.as_str()).collect();
    assert_eq!(keys.len(), ids.len(), "every row of the ten tables; log:\n{}", support::tail(&log, 30));
    let refused = fake.journal().entries.iter().filter(|e| e.status == 429).count();
    assert_eq!(refused, 0, "the budget kept every window under the instance's limit");
    assert!(requests.iter().all(|n| *n > 0.0), "the requests each table spent are counted: {requests:?}");
    // The table weighing 40 got more of the budget than any of weight 10.
    assert!(requests[0] > requests[1..].iter().cloned().fold(0.0, f64::max), "priority 40 spent the most: {requests:?}");
    eprintln!("requests per table: {requests:?}; status said: {slowed}");
}

#[test]
fn without_a_budget_a_429_without_headers_pauses_the_instance_and_nothing_is_lost() {
    let (fake, tables, ids) = rate_limited_instance();
    let (name, topic) = (unique("nobudget"), unique("nobudget"));
    let dir = work_dir("no-budget");
    let file = connector_file(&dir, &name, &budget_source(&fake, &tables, &name, &topic, &[]));
    let mut runner = Runner::start(&dir, "run", &[&file]);
    runner.wait_for_log("429 without Retry-After or X-RateLimit-Reset: every request to the instance waits", Duration::from_secs(120));
    let records = read_until(kafka_harness::shared().bootstrap(), &topic, Duration::from_secs(300), |r| {
        r.iter().map(|x| x.key.as_str()).collect::<std::collections::BTreeSet<_>>().len() >= ids.len()
    });
    let log = runner.stop();
    let keys: std::collections::BTreeSet<&str> = records.iter().map(|r| r.key.as_str()).collect();
    assert_eq!(keys.len(), ids.len(), "every row despite the 429s; log:\n{}", support::tail(&log, 30));
    assert!(!log.contains("unit parked"), "no table gave up");
    // After a pause the instance is not hit at once by everyone again: 429s stay few.
    let refused = fake.journal().entries.iter().filter(|e| e.status == 429).count();
    assert!(refused < 60, "{refused} requests refused: the pause keeps the host from hammering the instance");
}
