//! Credentials and resilience end to end: OAuth tokens obtained once for many tasks, refreshed
//! once when they expire, rate limits waited out within the in-flight cap, 5xx bursts retried and
//! then surfaced, and no secret in the log at the most verbose level.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use fake_snow::{FakeSnow, Fault, FaultAction, JournalEntry};
use support::kafka::read_until;
use support::{Runner, connector_file, entries, now_secs, tail, unique, work_dir};

const USER: &str = "oauth-user";
const PASSWORD: &str = "User-Pw-9f3e";
const CLIENT: &str = "snow-client";
const CLIENT_SECRET: &str = "Client-Secret-77ab";

fn oauth_fake(now: i64) -> FakeSnow {
    let fake = support::fake_with_user(USER, PASSWORD, Some(now));
    fake.add_oauth_client(CLIENT, CLIENT_SECRET, Some(1800));
    fake
}

fn oauth_source(fake: &FakeSnow, name: &str, topic: &str, tables: &[String]) -> BTreeMap<String, String> {
    let mut config = entries(&[
        ("name", name),
        ("component.path", support::signed(guest_artifacts::GUEST_SOURCE)),
        support::TRUSTED_KEYS,
        ("kafka.bootstrap.servers", kafka_harness::shared().bootstrap()),
        ("offset.storage.file.filename", "offsets.json"),
        ("snow.instance.url", &fake.url()),
        ("snow.auth.type", "oauth_password"),
        ("snow.auth.client.id", CLIENT),
        ("snow.auth.client.secret", "${env:E2E_CLIENT_SECRET}"),
        ("snow.auth.username", USER),
        ("snow.auth.password", "${env:E2E_PASSWORD}"),
        ("snow.tables", &tables.join(",")),
        ("snow.batch.size", "100"),
        ("snow.poll.interval.ms", "200"),
        ("snow.safety.lag.seconds", "2"),
        ("snow.retry.backoff.initial.ms", "50"),
        ("snow.retry.backoff.max.ms", "200"),
    ]);
    for t in tables {
        config.insert(format!("snow.table.{t}.topic"), topic.to_string());
    }
    config
}

fn tables(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("t{i:02}")).collect()
}

fn seed_all(fake: &FakeSnow, tables: &[String], rows: u64, start: i64, spread: u64) -> BTreeSet<String> {
    tables.iter().flat_map(|t| fake.shared().seed(t, rows, start, spread)).collect()
}

fn token_grants(fake: &FakeSnow) -> Vec<String> {
    fake.journal().entries.iter().filter(|e| e.path == "/oauth_token.do").map(|e| e.grant.clone().unwrap_or_default()).collect()
}

/// Secrets reach the runner through `${env:...}` providers, never through the file.
const SECRETS_ENV: [(&str, &str); 2] = [("E2E_CLIENT_SECRET", CLIENT_SECRET), ("E2E_PASSWORD", PASSWORD)];

fn start(dir: &std::path::Path, label: &str, file: &std::path::Path) -> Runner {
    Runner::spawn(dir, label, &[file], support::DEFAULT_LOG, &SECRETS_ENV)
}

fn all_keys(records: &[support::kafka::Read]) -> BTreeSet<String> {
    records.iter().map(|r| r.key.clone()).collect()
}

#[test]
fn fifty_tasks_needing_a_token_at_once_cause_exactly_one_token_request() {
    let now = now_secs();
    let fake = oauth_fake(now);
    let tables = tables(50);
    let ids = seed_all(&fake, &tables, 10, now - 3600, 600);
    let (name, topic) = (unique("oauth50"), unique("oauth50"));
    let dir = work_dir("oauth50");
    let mut config = oauth_source(&fake, &name, &topic, &tables);
    config.insert("tasks.max".into(), "4".into());
    let file = connector_file(&dir, &name, &config);
    let runner = start(&dir, "run", &file);
    let records = read_until(kafka_harness::shared().bootstrap(), &topic, Duration::from_secs(180), |r| all_keys(r).len() >= ids.len());
    let log = runner.stop();

    assert_eq!(all_keys(&records), ids, "every table arrived; log:\n{}", tail(&log, 30));
    assert_eq!(token_grants(&fake), ["password"], "fifty units needing a token at once made one token request");
    let journal = fake.journal();
    let table_requests: Vec<&JournalEntry> = journal.entries.iter().filter(|e| e.path.starts_with("/api/now/table/")).collect();
    assert!(table_requests.len() >= 50);
    assert!(table_requests.iter().all(|e| e.auth == "bearer" && e.request_id.as_deref().is_some_and(|id| id.starts_with("snow-"))));
    assert!(log.contains("planned 50 units over 4 tasks"), "{}", tail(&log, 20));
}

#[test]
fn an_expired_token_is_refreshed_once_and_the_refused_request_sent_again() {
    let now = now_secs();
    let fake = oauth_fake(now);
    let tables = tables(10);
    let mut ids = seed_all(&fake, &tables, 20, now - 3600, 600);
    let (name, topic) = (unique("refresh"), unique("refresh"));
    let dir = work_dir("refresh");
    let file = connector_file(&dir, &name, &oauth_source(&fake, &name, &topic, &tables));
    let mut runner = start(&dir, "run", &file);
    read_until(kafka_harness::shared().bootstrap(), &topic, Duration::from_secs(120), |r| all_keys(r).len() >= ids.len());

    fake.expire_access_tokens();
    ids.extend(seed_all(&fake, &tables, 5, now - 300, 60));
    read_until(kafka_harness::shared().bootstrap(), &topic, Duration::from_secs(120), |r| all_keys(r).len() >= ids.len());
    runner.wait_for_log("grant=refresh_token", Duration::from_secs(10));
    assert_eq!(token_grants(&fake), ["password", "refresh_token"], "one password grant, then exactly one refresh for ten units");

    // The refresh token is revoked too: the refresh is refused and the primary grant takes over.
    fake.revoke_refresh_tokens();
    fake.expire_access_tokens();
    ids.extend(seed_all(&fake, &tables, 5, now - 200, 60));
    let records = read_until(kafka_harness::shared().bootstrap(), &topic, Duration::from_secs(120), |r| all_keys(r).len() >= ids.len());
    runner.wait_for_log("the refresh token was refused, using the primary grant", Duration::from_secs(10));
    let log = runner.stop();

    assert_eq!(all_keys(&records), ids, "rows written after each expiry arrived");
    assert_eq!(
        token_grants(&fake),
        ["password", "refresh_token", "refresh_token", "password"],
        "a refused refresh falls back to the primary grant once"
    );
    let journal = fake.journal();
    let refused: Vec<&JournalEntry> = journal.entries.iter().filter(|e| e.status == 401 && e.path.starts_with("/api/now/table/")).collect();
    assert!(!refused.is_empty(), "the expired token was refused at least once");
    for r in &refused {
        let again =
            journal.entries.iter().find(|e| e.seq > r.seq && e.request_id == r.request_id).expect("the refused request was sent again");
        // 404 is v1's answer to an empty page: accepted, like 200.
        assert!(matches!(again.status, 200 | 404) && again.auth == "bearer", "sent again with the fresh token and accepted: {again:?}");
    }
    assert!(!log.contains("poll failed"), "the guests never saw the 401:\n{}", tail(&log, 30));
}

#[test]
fn a_429_storm_is_waited_out_without_exceeding_the_in_flight_cap() {
    let now = now_secs();
    let fake = oauth_fake(now);
    let tables = tables(8);
    let ids = seed_all(&fake, &tables, 40, now - 3600, 600);
    fake.add_fault(
        Fault::always(FaultAction::Status { status: 429, retry_after: Some("1".into()) })
            .on_method("GET")
            .on_path("/api/now/table/")
            .after(8)
            .times(12),
    );
    let (name, topic) = (unique("storm"), unique("storm"));
    let dir = work_dir("storm");
    let mut config = oauth_source(&fake, &name, &topic, &tables);
    config.insert("snow.instance.max.in.flight".into(), "4".into());
    let file = connector_file(&dir, &name, &config);
    let runner = start(&dir, "run", &file);
    let records = read_until(kafka_harness::shared().bootstrap(), &topic, Duration::from_secs(180), |r| all_keys(r).len() >= ids.len());
    let log = runner.stop();

    assert_eq!(all_keys(&records), ids, "every row arrived through the storm; log:\n{}", tail(&log, 30));
    let journal = fake.journal();
    assert!(journal.max_in_flight <= 4, "never more than the cap in flight, got {}", journal.max_in_flight);
    let limited: Vec<&JournalEntry> = journal.entries.iter().filter(|e| e.status == 429).collect();
    assert_eq!(limited.len(), 12);
    for e in &limited {
        let next =
            journal.entries.iter().find(|n| n.seq > e.seq && n.request_id == e.request_id).expect("a rate-limited request is sent again");
        assert!(next.at_ms >= e.at_ms + 1000, "Retry-After: 1 was waited out ({} ms after the 429)", next.at_ms - e.at_ms);
    }
    assert!(log.contains("rate limited (429): in-flight limit lowered from 4 to 2"), "the limit halved on 429:\n{}", tail(&log, 30));
    assert!(!log.contains("poll failed"), "the guests waited the storm out themselves");
}

#[test]
fn a_5xx_burst_is_retried_and_a_longer_outage_surfaces_as_a_retryable_error() {
    let now = now_secs();
    let fake = oauth_fake(now);
    let tables = vec!["burst".to_string(), "outage".to_string()];
    let ids = seed_all(&fake, &tables[..1], 30, now - 3600, 600);
    fake.add_fault(Fault::always(FaultAction::Status { status: 503, retry_after: None }).on_path("/api/now/table/burst").times(3));
    fake.add_fault(Fault::always(FaultAction::Status { status: 502, retry_after: None }).on_path("/api/now/table/outage"));
    let (name, topic) = (unique("fivexx"), unique("fivexx"));
    let dir = work_dir("fivexx");
    let mut config = oauth_source(&fake, &name, &topic, &tables);
    config.insert("snow.retry.max.attempts".into(), "4".into());
    let file = connector_file(&dir, &name, &config);
    let mut runner = start(&dir, "run", &file);
    let records = read_until(kafka_harness::shared().bootstrap(), &topic, Duration::from_secs(120), |r| all_keys(r).len() >= ids.len());
    runner.wait_for_log("gave up after 4 attempts (snow.retry.max.attempts)", Duration::from_secs(60));
    let log = runner.stop();

    assert_eq!(all_keys(&records), ids, "the burst was retried away");
    let journal = fake.journal();
    let burst: Vec<&JournalEntry> = journal.entries.iter().filter(|e| e.path == "/api/now/table/burst").collect();
    assert_eq!(burst.iter().filter(|e| e.status == 503).count(), 3);
    assert_eq!(burst[0].request_id, burst[3].request_id, "the burst's retries kept one request id");
    let outage: Vec<&JournalEntry> = journal.entries.iter().filter(|e| e.path == "/api/now/table/outage").collect();
    assert!(outage.len() >= 4);
    assert!(outage[..4].iter().all(|e| e.request_id == outage[0].request_id && e.status == 502), "four attempts of one request");
    let line = log.lines().find(|l| l.contains("gave up after 4 attempts")).unwrap();
    assert!(
        line.contains("poll failed, retrying") && line.contains("unit=outage") && line.contains("ServiceNow answered 502"),
        "surfaced to the host as retryable: {line}"
    );
    assert!(!log.lines().any(|l| l.contains("poll failed") && l.contains("unit=burst")), "the burst never reached the host");
}

#[test]
fn no_secret_reaches_the_log_at_the_most_verbose_level() {
    let now = now_secs();
    let fake = oauth_fake(now);
    let basic_tables = vec!["basic_t".to_string()];
    let oauth_tables = tables(3);
    let mut ids = seed_all(&fake, &basic_tables, 30, now - 3600, 600);
    ids.extend(seed_all(&fake, &oauth_tables, 30, now - 3600, 600));
    fake.add_fault(Fault::always(FaultAction::Status { status: 429, retry_after: Some("1".into()) }).on_method("GET").after(3).times(2));
    fake.add_fault(Fault::always(FaultAction::Status { status: 500, retry_after: None }).on_method("GET").after(6).times(2));
    let topic = unique("secrets");
    let dir = work_dir("secrets");
    let oauth_name = unique("oauthsrc");
    let oauth_file = connector_file(&dir, &oauth_name, &oauth_source(&fake, &oauth_name, &topic, &oauth_tables));
    let basic_name = unique("basicsrc");
    let mut basic = oauth_source(&fake, &basic_name, &topic, &basic_tables);
    basic.insert("snow.auth.type".into(), "basic".into());
    for k in ["snow.auth.client.id", "snow.auth.client.secret"] {
        basic.remove(k);
    }
    let basic_file = connector_file(&dir, &basic_name, &basic);
    let mut runner = Runner::spawn(&dir, "trace", &[&oauth_file, &basic_file], "trace", &SECRETS_ENV);
    read_until(kafka_harness::shared().bootstrap(), &topic, Duration::from_secs(120), |r| all_keys(r).len() >= ids.len() / 2);
    fake.expire_access_tokens();
    runner.wait_for_log("sending once more with a fresh token", Duration::from_secs(30));
    read_until(kafka_harness::shared().bootstrap(), &topic, Duration::from_secs(120), |r| all_keys(r).len() >= ids.len());
    let log = runner.stop();

    assert!(log.contains(" TRACE "), "the log is at trace level");
    for path in ["401", "429", "500"] {
        assert!(fake.journal().entries.iter().any(|e| e.status.to_string() == path), "the run went through a {path}");
    }
    let basic_header = snow_core::auth::basic::authorization(USER, PASSWORD);
    let mut secrets = vec![PASSWORD.to_string(), CLIENT_SECRET.to_string(), basic_header.trim_start_matches("Basic ").to_string()];
    secrets.extend(fake.issued_tokens());
    assert!(secrets.len() >= 4, "tokens were issued");
    for secret in &secrets {
        assert!(!log.contains(secret.as_str()), "a secret reached the log: {secret}");
    }
}

#[test]
fn a_second_401_is_final() {
    let now = now_secs();
    let fake = oauth_fake(now);
    // Tokens that are dead on arrival: every request is refused.
    fake.add_oauth_client(CLIENT, CLIENT_SECRET, Some(0));
    let tables = vec!["locked".to_string()];
    seed_all(&fake, &tables, 5, now - 3600, 600);
    let (name, topic) = (unique("final401"), unique("final401"));
    let dir = work_dir("final401");
    let file = connector_file(&dir, &name, &oauth_source(&fake, &name, &topic, &tables));
    let mut runner = start(&dir, "run", &file);
    let log = runner.wait_for_log("unit parked", Duration::from_secs(60));
    runner.kill();

    let line = log.lines().find(|l| l.contains("unit parked")).unwrap();
    assert!(line.contains("ServiceNow answered 401") && line.contains("login refused"), "{line}");
    let journal = fake.journal();
    let table: Vec<&JournalEntry> = journal.entries.iter().filter(|e| e.path.starts_with("/api/now/table/")).collect();
    assert_eq!(table.len(), 2, "sent once, re-sent once with a fresh token, then final");
    assert!(table.iter().all(|e| e.status == 401 && e.request_id == table[0].request_id));
    assert_eq!(token_grants(&fake).len(), 2, "one token per attempt");
}

#[test]
fn a_body_trickling_past_the_whole_body_timeout_is_cut_off_and_retried() {
    let now = now_secs();
    let fake = oauth_fake(now);
    let tables = vec!["slow".to_string()];
    let ids = seed_all(&fake, &tables, 50, now - 3600, 600);
    // Ten pieces 250 ms apart: every gap is short, the whole body takes 2.25 s.
    fake.add_fault(
        Fault::always(FaultAction::SlowBody { chunks: 10, gap_ms: 250 }).on_method("GET").on_path("/api/now/table/slow").times(1),
    );
    let (name, topic) = (unique("slowbody"), unique("slowbody"));
    let dir = work_dir("slowbody");
    let mut config = oauth_source(&fake, &name, &topic, &tables);
    config.insert("snow.http.body.timeout.ms".into(), "1000".into());
    let file = connector_file(&dir, &name, &config);
    let runner = start(&dir, "run", &file);
    let records = read_until(kafka_harness::shared().bootstrap(), &topic, Duration::from_secs(60), |r| all_keys(r).len() >= ids.len());
    let log = runner.stop();

    assert_eq!(all_keys(&records), ids);
    let journal = fake.journal();
    let slow: Vec<&JournalEntry> = journal.entries.iter().filter(|e| e.path == "/api/now/table/slow").collect();
    assert_eq!(slow[1].request_id, slow[0].request_id, "the cut-off read was retried as the same request");
    let gap = slow[1].at_ms - slow[0].at_ms;
    assert!((1000..2250).contains(&gap), "cut off at the 1 s whole-body deadline, before the 2.25 s body ended ({gap} ms)");
    assert!(!log.contains("poll failed"), "retried inside the component");
}

#[test]
fn two_connectors_with_one_client_and_user_but_different_secrets_do_not_share_a_token() {
    let now = now_secs();
    let fake = oauth_fake(now);
    let (right_tables, wrong_tables) = (vec!["right_t".to_string()], vec!["wrong_t".to_string()]);
    let ids = seed_all(&fake, &right_tables, 40, now - 3600, 600);
    seed_all(&fake, &wrong_tables, 40, now - 3600, 600);
    let dir = work_dir("twosecrets");
    let topic = unique("twosecrets");
    let right_name = unique("right");
    let right = connector_file(&dir, &right_name, &oauth_source(&fake, &right_name, &topic, &right_tables));
    let wrong_name = unique("wrong");
    let mut wrong = oauth_source(&fake, &wrong_name, &topic, &wrong_tables);
    wrong.insert("snow.auth.client.secret".into(), "${env:E2E_WRONG_SECRET}".into());
    let wrong = connector_file(&dir, &wrong_name, &wrong);
    let env = [SECRETS_ENV[0], SECRETS_ENV[1], ("E2E_WRONG_SECRET", "Not-The-Secret-1")];
    let mut runner = Runner::spawn(&dir, "run", &[&right, &wrong], support::DEFAULT_LOG, &env);
    let records = read_until(kafka_harness::shared().bootstrap(), &topic, Duration::from_secs(120), |r| all_keys(r).len() >= ids.len());
    let log = runner.wait_for_log("unit parked", Duration::from_secs(60));
    runner.kill();

    assert_eq!(all_keys(&records), ids, "the right secret works, and only its table's rows arrive");
    let parked = log.lines().find(|l| l.contains("unit parked")).unwrap();
    assert!(
        parked.contains(&wrong_name) && parked.contains("unit=wrong_t") && parked.contains("401"),
        "the wrong one is refused: {parked}"
    );
    let journal = fake.journal();
    let wrong_reads: Vec<&JournalEntry> = journal.entries.iter().filter(|e| e.path == "/api/now/table/wrong_t").collect();
    assert!(wrong_reads.iter().all(|e| e.status == 401 || e.auth == "none"), "the wrong secret never read a row with a token");
    assert!(!wrong_reads.iter().any(|e| e.auth == "bearer" && e.status == 200), "{wrong_reads:?}");
    let grants = token_grants(&fake);
    assert!(grants.len() >= 2, "each secret asked for its own token: {grants:?}");
}

#[test]
fn an_oversized_token_answer_is_refused_at_its_cap() {
    let now = now_secs();
    let fake = oauth_fake(now);
    let tables = vec!["capped_t".to_string()];
    seed_all(&fake, &tables, 5, now - 3600, 600);
    // A valid token answer followed by 50 MB of spaces (still valid JSON).
    fake.add_fault(Fault::always(FaultAction::PadBody { bytes: 50 << 20 }).on_path("/oauth_token.do"));
    let (name, topic) = (unique("bigtoken"), unique("bigtoken"));
    let dir = work_dir("bigtoken");
    let file = connector_file(&dir, &name, &oauth_source(&fake, &name, &topic, &tables));
    let mut runner = start(&dir, "run", &file);
    let log = runner.wait_for_log("OAuth token request failed", Duration::from_secs(120));
    runner.kill();
    let line = log.lines().find(|l| l.contains("OAuth token request failed")).unwrap();
    assert!(line.contains("exceeds 65536 bytes"), "refused at the 64 KiB cap, not read whole: {line}");
    assert!(fake.journal().entries.iter().all(|e| !(e.path.starts_with("/api/now/table/") && e.status == 200)), "no table was read");
}
