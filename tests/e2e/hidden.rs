//! Rows hidden from the integration user (row-level ACLs, domain separation, before-query rules)
//! end to end: the fake reads each window before it drops hidden rows, as ServiceNow does, and
//! the cursor still delivers every readable row exactly once — with the instance's
//! `X-Total-Count`/`Link` and without them — and says so when nothing readable remains.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use fake_snow::{FakeSnow, JournalEntry};
use support::kafka::{Read, read_until};
use support::{Runner, connector_file, now_secs, tail, unique, wait_until, work_dir};

const USER: &str = "acl-user";
const PASSWORD: &str = "Acl-Pw-77";

fn fake(now: i64, pagination_headers: bool) -> FakeSnow {
    let fake = support::fake_with_user(USER, PASSWORD, Some(now));
    fake.shared().set_pagination_headers(pagination_headers);
    fake
}

fn config(fake: &FakeSnow, name: &str, topic: &str, extra: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut c =
        support::source_entries(&fake.url(), name, topic, &["incident"], &[("snow.auth.username", USER), ("snow.auth.password", PASSWORD)]);
    c.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    c
}

fn keys(records: &[Read]) -> BTreeSet<String> {
    records.iter().map(|r| r.key.clone()).collect()
}

fn sweeps(fake: &FakeSnow) -> usize {
    support::sweep_starts(fake, "incident")
}

/// Runs the connector until every readable row arrived, then through three more sweeps (by the
/// fake's journal), and returns what the topic holds.
fn deliver(fake: &FakeSnow, label: &str, readable: &BTreeSet<String>, extra: &[(&str, &str)]) -> Vec<Read> {
    let (name, topic) = (unique(label), unique(label));
    let dir = work_dir(label);
    let file = connector_file(&dir, &name, &config(fake, &name, &topic, extra));
    let runner = Runner::start(&dir, "run", &[&file]);
    let bootstrap = kafka_harness::shared().bootstrap();
    let first = read_until(bootstrap, &topic, Duration::from_secs(300), |r| keys(r).len() >= readable.len());
    let seen = sweeps(fake);
    wait_until("three more sweeps", Duration::from_secs(60), || (sweeps(fake) >= seen + 3).then_some(()));
    let records = read_until(bootstrap, &topic, Duration::from_secs(30), |_| true);
    let log = runner.stop();
    assert_eq!(keys(&first), *readable, "every readable row, and nothing hidden; log:\n{}", tail(&log, 20));
    assert_eq!(records.len(), readable.len(), "each exactly once, also after three more sweeps; log:\n{}", tail(&log, 20));
    records
}

/// 30,000 rows, 12,000 of them in one second, one row in seven hidden.
fn one_in_seven(pagination_headers: bool, label: &str) {
    let now = now_secs();
    let fake = fake(now, pagination_headers);
    let mut ids = fake.shared().seed("incident", 9_000, now - 3_600, 1_800);
    ids.extend(fake.shared().seed("incident", 12_000, now - 1_700, 0));
    ids.extend(fake.shared().seed("incident", 9_000, now - 1_600, 1_500));
    let hidden: Vec<String> = ids.iter().step_by(7).cloned().collect();
    fake.shared().hide_rows("incident", hidden.clone());
    let readable: BTreeSet<String> = ids.iter().filter(|id| !hidden.contains(id)).cloned().collect();
    assert_eq!((ids.len(), readable.len()), (30_000, 30_000 - 4_286));
    deliver(&fake, label, &readable, &[]);
}

#[test]
fn one_row_in_seven_hidden_across_30000_rows_with_a_12000_row_second_arrives_once() {
    one_in_seven(true, "seventh");
}

#[test]
fn one_row_in_seven_hidden_arrives_once_when_the_instance_sends_no_count_or_link() {
    one_in_seven(false, "seventh-blind");
}

/// 6,000 rows in one second with the 2,500 after the first 1,500 (in sys_id order) hidden, read
/// 1,000 at a time; returns the crossing as (requests, milliseconds) from the fake's journal.
fn hidden_block(pagination_headers: bool, label: &str) -> (usize, u64) {
    let now = now_secs();
    let fake = fake(now, pagination_headers);
    let mut before = fake.shared().seed("incident", 300, now - 900, 200);
    let mut second = fake.shared().seed("incident", 6_000, now - 600, 0);
    let after = fake.shared().seed("incident", 300, now - 500, 200);
    second.sort();
    let block: Vec<String> = second[1_500..4_000].to_vec();
    fake.shared().hide_rows("incident", block.clone());
    before.extend(second.iter().filter(|id| !block.contains(id)).cloned());
    before.extend(after);
    let readable: BTreeSet<String> = before.into_iter().collect();
    deliver(&fake, label, &readable, &[("snow.batch.size", "1000")]);
    // The first pass over the second: from the window that began at the block (nothing readable)
    // to the one that found the rows after it.
    let entries = fake.journal().entries;
    let drains: Vec<&JournalEntry> =
        entries.iter().filter(|e| e.query.as_deref().is_some_and(|q| q.contains(&format!("sys_id>{}", second[1_499])))).collect();
    let start = drains.first().unwrap_or_else(|| panic!("no window started right before the hidden block"));
    assert_eq!(start.returned, Some(0), "the window at the block holds no readable row");
    let is_look_above = |e: &JournalEntry| e.query.as_deref().is_some_and(|q| q.contains("ORDERBYDESC"));
    let found = entries
        .iter()
        .find(|e| e.seq > start.seq && !is_look_above(e) && e.returned.is_some_and(|n| n > 0))
        .unwrap_or_else(|| panic!("no readable row after the block"));
    let requests = entries.iter().filter(|e| e.seq >= start.seq && e.seq <= found.seq).count();
    let looked_above = entries.iter().any(|e| e.seq > start.seq && e.seq < found.seq && is_look_above(e));
    assert_eq!(looked_above, !pagination_headers, "a look above the cursor only when the instance says nothing about what follows");
    let grown = entries.iter().filter(|e| e.seq > start.seq && e.seq <= found.seq).any(|e| e.limit.is_some_and(|l| l > 1000));
    assert!(grown, "the window grew past batch.size to cross the block");
    (requests, found.at_ms - start.at_ms)
}

#[test]
fn a_contiguous_hidden_block_of_2500_rows_inside_one_second_is_crossed() {
    let (requests, ms) = hidden_block(true, "block");
    eprintln!("crossed 2,500 hidden rows with the count in {requests} requests, {ms} ms");
    assert!(requests <= 4, "1,000 → 2,000 → 4,000 rows: {requests} requests");
}

#[test]
fn a_contiguous_hidden_block_is_crossed_when_the_instance_sends_no_count_or_link() {
    let (requests, ms) = hidden_block(false, "block-blind");
    eprintln!("crossed 2,500 hidden rows without the count in {requests} requests, {ms} ms");
    assert!(requests <= 5, "a look above, then 1,000 → 2,000 → 4,000 rows: {requests} requests");
}

#[test]
fn a_table_whose_remaining_rows_are_all_hidden_says_so_and_does_not_spin() {
    let now = now_secs();
    let fake = fake(now, true);
    let readable: BTreeSet<String> = fake.shared().seed("incident", 500, now - 900, 100).into_iter().collect();
    let rest = fake.shared().seed("incident", 300, now - 600, 100);
    fake.shared().hide_rows("incident", rest);
    let (name, topic) = (unique("rest"), unique("rest"));
    let dir = work_dir("rest");
    let file = connector_file(&dir, &name, &config(&fake, &name, &topic, &[("snow.batch.size", "100")]));
    let mut runner = Runner::start_with_args(&dir, "run", &[&file], &["--status-listen", "127.0.0.1:0"]);
    let addr = support::status_address(&mut runner);
    let bootstrap = kafka_harness::shared().bootstrap();
    let records = read_until(bootstrap, &topic, Duration::from_secs(120), |r| keys(r).len() >= readable.len());
    assert_eq!(keys(&records), readable);

    let unit = wait_until("the hidden rest in /status", Duration::from_secs(30), || {
        support::unit_status(&addr, "incident").filter(|u| !u["message"].is_null())
    });
    assert_eq!(unit["state"], "running", "{unit}");
    let message = unit["message"].as_str().unwrap();
    assert!(message.contains("the 300 rows after the cursor") && message.contains("hidden from the integration user"), "{message}");
    let gauge = format!("snow_source_hidden_rows{{connector=\"{name}\",table=\"incident\"}}");
    wait_until("the hidden-rows gauge", Duration::from_secs(30), || (support::metric(&addr, &gauge) == Some(300.0)).then_some(()));

    // It does not spin: sweeps keep to poll.interval.ms, each with a bounded number of requests.
    let (from, sweeps_from) = (fake.journal().entries.len(), sweeps(&fake));
    std::thread::sleep(Duration::from_secs(3)); // an observation window, not a synchronisation
    let journal = fake.journal();
    let (requests, sweeps_seen) = (journal.entries.len() - from, sweeps(&fake) - sweeps_from);
    eprintln!("{requests} requests over {sweeps_seen} sweeps in 3 s");
    assert!((3..=16).contains(&sweeps_seen), "about one sweep per 200 ms: {sweeps_seen}");
    assert!(requests <= sweeps_seen * 12, "{requests} requests over {sweeps_seen} sweeps");

    // A readable row after the hidden ones is still found, and the notice clears.
    let late = fake.shared().seed("incident", 1, now - 100, 0);
    let records = read_until(bootstrap, &topic, Duration::from_secs(60), |r| r.iter().any(|r| r.key == late[0]));
    assert_eq!(records.len(), readable.len() + 1, "the new row, once, and nothing hidden");
    wait_until("the notice cleared", Duration::from_secs(30), || {
        support::unit_status(&addr, "incident").filter(|u| u["message"].is_null()).map(drop)
    });
    let log = runner.stop();
    assert!(!log.contains(PASSWORD), "no secret in the log");
}
