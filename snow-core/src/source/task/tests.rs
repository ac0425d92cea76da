use super::*;
use crate::clock::ManualClock;
use crate::config::reader::entries_from_pairs;
use crate::http::transport::{Request, Response, TransportError};

mod attachments;
mod deletes;
mod journal;
mod snapshot;

/// One scripted answer: status, body, and the `X-Total-Count` an instance would send when the
/// request asks for the count.
type Scripted = (u16, String, Option<u64>);

/// Answers each request with the next scripted answer at server time `now` and keeps the
/// decoded `sysparm_query` of every request.
struct Script {
    answers: Vec<Scripted>,
    now: i64,
    queries: Vec<String>,
    /// Every URL sent.
    urls: Vec<String>,
    /// The request started ahead, if any; sends that took it; started requests never taken.
    started: Option<Request>,
    taken: usize,
    abandoned: usize,
}

impl Transport for &mut Script {
    fn send(&mut self, request: &Request) -> Result<Response, TransportError> {
        match self.started.take() {
            Some(started) if started == *request => self.taken += 1,
            Some(_) => self.abandoned += 1,
            None => {}
        }
        let query = request.url.split("sysparm_query=").nth(1).unwrap_or("").split('&').next().unwrap_or("");
        self.queries.push(decode(query));
        self.urls.push(request.url.clone());
        let (status, body, total) = self.answers.remove(0);
        if body.len() > request.max_response_bytes {
            return Err(TransportError::new(crate::http::TransportErrorKind::TooLarge, "response body exceeds the limit"));
        }
        let mut headers = vec![("Date".into(), Timestamp(self.now).to_http_date())];
        if let Some(total) = total.filter(|_| !request.url.contains("sysparm_no_count=true")) {
            headers.push(("X-Total-Count".into(), total.to_string()));
        }
        Ok(Response { status, headers, body: body.into_bytes() })
    }

    fn start(&mut self, request: &Request) {
        if self.started.replace(request.clone()).is_some() {
            self.abandoned += 1;
        }
    }
}

fn decode(s: &str) -> String {
    let mut out = Vec::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            out.push(u8::from_str_radix(&s[i + 1..i + 3], 16).unwrap());
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap()
}

const T0: i64 = 1_700_000_000;

fn entries(extra: &[(&str, &str)]) -> Entries {
    let start = Timestamp(T0 - 100).to_string();
    let mut pairs = vec![
        ("snow.start.timestamp", start.as_str()),
        ("snow.instance.url", "https://acme.service-now.com"),
        ("snow.tables", "incident"),
        ("snow.batch.size", "2"),
        ("snow.safety.lag.seconds", "0"),
        ("snow.startup.probe", "false"),
        ("snow.overlap.seconds", "0"),
    ];
    pairs.retain(|(k, _)| !extra.iter().any(|(e, _)| e == k));
    pairs.extend_from_slice(extra);
    entries_from_pairs(pairs).unwrap()
}

fn row(id: &str, ts: i64, mods: u32) -> String {
    format!(r#"{{"sys_id":"{id}","sys_updated_on":"{}","sys_mod_count":"{mods}"}}"#, Timestamp(T0 + ts))
}

/// A page whose rows are every row the query matches (nothing follows it).
fn page(rows: &[String]) -> Scripted {
    page_of(rows, rows.len() as u64)
}

/// A page out of `total` rows matching the query (counted before ACLs).
fn page_of(rows: &[String], total: u64) -> Scripted {
    (200, format!(r#"{{"result":[{}]}}"#, rows.join(",")), Some(total))
}

fn script(answers: Vec<Scripted>) -> Script {
    Script { answers, now: T0 + 100, queries: vec![], urls: vec![], started: None, taken: 0, abandoned: 0 }
}

fn position(batch: &PollBatch) -> Cursor {
    Cursor::from_position(&batch.offset.as_ref().unwrap().position).unwrap()
}

#[test]
fn pages_become_records_with_offsets_and_resume_from_them() {
    let mut s = script(vec![page(&[]), page_of(&[row("a", 0, 0), row("b", 0, 0)], 3)]);
    let mut task = SourceTask::open(&entries(&[]), &[], &mut s, ManualClock::default()).unwrap();
    assert!(task.poll().unwrap().records.is_empty(), "the start second is drained first");
    let batch = task.poll().unwrap();
    assert_eq!(batch.records.len(), 2);
    assert_eq!(batch.next_poll_ms, 0, "a full page is chained without waiting");
    assert_eq!(batch.key_text(1), Some("b"));
    assert_eq!(batch.value(1), Some(row("b", 0, 0).as_bytes()));
    assert_eq!(batch.records[1].timestamp_ms, Some(Timestamp(T0).as_millis()));
    assert_eq!(batch.record_headers_of(1), [("snow.sys_mod_count".to_string(), "0".to_string())]);
    assert_eq!(batch.headers.len(), 3, "snow.table, snow.instance and snow.source.operation, once per batch");
    let offsets = vec![batch.offset.clone().unwrap()];
    drop(task);
    let task = SourceTask::open(&entries(&[]), &offsets, &mut s, ManualClock::default()).unwrap();
    assert_eq!(task.cursor(), Cursor { ts: Timestamp(T0), id: "b".into() });
}

#[test]
fn a_continuing_sweep_starts_the_next_page_ahead_and_a_finished_one_does_not() {
    // Batch size 2: the start second's drain, two full advance pages over two seconds each, a
    // short page without a count (it was chained after a full one), so the sweep goes on after it:
    // the drain of c's second comes back empty without a count and is asked again with it, then
    // the advance past it finds nothing more.
    let mut s = script(vec![
        page(&[]),
        page_of(&[row("a", 1, 0), row("b", 2, 0)], 3),
        page(&[row("b", 2, 0), row("c", 3, 0)]),
        page(&[row("c", 3, 0)]),
        page(&[]),
        page(&[]),
        page(&[]),
    ]);
    let mut task = SourceTask::open(&entries(&[]), &[], &mut s, ManualClock::default()).unwrap();
    let mut ids = Vec::new();
    let last = loop {
        let batch = task.poll().unwrap();
        ids.extend((0..batch.records.len()).map(|i| batch.key_text(i).unwrap().to_string()));
        if batch.next_poll_ms > 0 {
            break batch;
        }
    };
    assert_eq!(ids, ["a", "b", "c"], "each row once: a full page's last second is read again whole, not emitted twice");
    assert!(last.records.is_empty() && last.offset.is_none(), "the sweep ends on the page that found nothing more");
    drop(task);
    assert_eq!((s.taken, s.abandoned), (6, 0), "every request after the first was started ahead and taken");
    let counted: Vec<bool> = s.urls.iter().map(|u| !u.contains("sysparm_no_count")).collect();
    assert_eq!(
        counted,
        [true, true, false, false, false, true, true],
        "the count is asked by the first window of each step and by an empty window asked again, never after rows"
    );
    assert!(s.started.is_none(), "a finished sweep starts nothing: the next one waits for poll.interval.ms");
}

#[test]
fn a_changed_query_refuses_the_stored_offset_and_says_how_to_reset() {
    let mut s = script(vec![]);
    let old = SourceTask::open(&entries(&[]), &[], &mut s, ManualClock::default()).unwrap().partition_key().to_string();
    let offsets = vec![SourceOffset { partition: old, position: Cursor::before(Timestamp(5)).to_position() }];
    let Err(err) = SourceTask::open(&entries(&[("snow.table.incident.query", "active=true")]), &offsets, &mut s, ManualClock::default())
    else {
        panic!("expected a refusal")
    };
    let text = err.to_string();
    assert!(text.contains("snow.table.incident.query: the stored offset of table incident was made with another query"), "{text}");
    assert!(text.contains("snow-connect offsets reset --file"), "{text}");
}

#[test]
fn a_bad_row_fails_the_table_or_is_skipped_with_a_note() {
    let bad = page(&[row("a", 0, 0), r#"{"sys_updated_on":"2023-11-14 22:13:20"}"#.to_string()]);
    let mut s = script(vec![page(&[]), bad.clone()]);
    let mut task = SourceTask::open(&entries(&[]), &[], &mut s, ManualClock::default()).unwrap();
    task.poll().unwrap();
    assert_eq!(task.poll().unwrap_err().to_string(), "table incident: a row has no sys_id (snow.bad.row.behavior=skip would skip it)");
    let mut s = script(vec![page(&[]), bad]);
    let mut task = SourceTask::open(&entries(&[("snow.bad.row.behavior", "skip")]), &[], &mut s, ManualClock::default()).unwrap();
    task.poll().unwrap();
    assert_eq!(task.poll().unwrap().records.len(), 1);
    assert_eq!(task.counters().bad_rows_skipped, 1);
    assert_eq!(task.take_notes()[0].message, "table incident: skipped row 1 of a page: a row has no sys_id");
}

#[test]
fn each_sweep_re_reads_the_overlap_and_suppresses_what_was_emitted() {
    let mut s = script(vec![
        // Sweep 1: drain the start second (empty), advance: rows at +10 and +20, short page: done.
        page(&[]),
        page(&[row("a", 10, 0)]),
        // Sweep 2 starts 15 s before +10 ... the overlap of 15 s before the furthest row (+10):
        // drain second -5 (empty), then advance: a again (same version), late row l at +5, a new version of a at +30.
        page(&[]),
        page(&[row("l", 5, 0), row("a", 10, 0), row("a2", 30, 1)]),
    ]);
    let mut task =
        SourceTask::open(&entries(&[("snow.overlap.seconds", "15"), ("snow.batch.size", "5")]), &[], &mut s, ManualClock::default())
            .unwrap();
    assert!(task.poll().unwrap().records.is_empty());
    let first = task.poll().unwrap();
    assert_eq!(first.records.len(), 1);
    assert!(first.next_poll_ms > 0, "caught up: wait for the next sweep");
    assert!(task.poll().unwrap().records.is_empty());
    let second = task.poll().unwrap();
    let keys: Vec<&str> = (0..second.records.len()).map(|i| second.key_text(i).unwrap()).collect();
    assert_eq!(keys, ["l", "a2"], "the late row is emitted, the version already emitted is not");
    assert_eq!(second.value(0), Some(row("l", 5, 0).as_bytes()));
    assert_eq!(task.counters().duplicates_suppressed, 1);
    assert_eq!(position(&first), Cursor { ts: Timestamp(T0 + 10), id: "a".into() });
    assert_eq!(position(&second), Cursor { ts: Timestamp(T0 + 30), id: "a2".into() }, "the late row did not move the offset back");
    let mut s2 = script(vec![page(&[]), page(&[row("a", 10, 0)]), page(&[]), page(&[row("l", 5, 0)])]);
    let mut late =
        SourceTask::open(&entries(&[("snow.overlap.seconds", "15"), ("snow.batch.size", "5")]), &[], &mut s2, ManualClock::default())
            .unwrap();
    for _ in 0..3 {
        late.poll().unwrap();
    }
    let only_late = late.poll().unwrap();
    assert_eq!(only_late.records.len(), 1);
    assert_eq!(
        position(&only_late),
        Cursor { ts: Timestamp(T0 + 10), id: "a".into() },
        "a batch of only a late row keeps the furthest position"
    );
    assert_eq!(s.queries[2], format!("sys_updated_on={}^ORDERBYsys_id", Timestamp(T0 - 5)), "the second sweep starts 15 s before +10");
}

#[test]
fn a_restart_re_reads_the_overlap_before_the_stored_offset() {
    let stored = Cursor { ts: Timestamp(T0 + 50), id: "m".into() };
    let mut s = script(vec![]);
    let key = SourceTask::open(&entries(&[]), &[], &mut s, ManualClock::default()).unwrap().partition_key().to_string();
    let offsets = vec![SourceOffset { partition: key, position: stored.to_position() }];
    let mut s = script(vec![page(&[])]);
    let mut task = SourceTask::open(&entries(&[("snow.overlap.seconds", "20")]), &offsets, &mut s, ManualClock::default()).unwrap();
    task.poll().unwrap();
    assert_eq!(s.queries[0], format!("sys_updated_on={}^ORDERBYsys_id", Timestamp(T0 + 30)));
}

#[test]
fn a_cutovers_seed_suppresses_the_versions_the_old_connector_wrote_and_only_those() {
    let stored = Cursor { ts: Timestamp(T0 + 50), id: String::new() };
    let seen = |id: &str, ts: i64, mods: &str| crate::cursor::SeenVersion { ts: Timestamp(T0 + ts), id: id.into(), mod_count: mods.into() };
    let mut s = script(vec![]);
    let key = SourceTask::open(&entries(&[]), &[], &mut s, ManualClock::default()).unwrap().partition_key().to_string();
    let position = stored.to_position_with(&[seen("a", 40, "1"), seen("b", 45, "2")]);
    assert_eq!(Cursor::from_position(&position).unwrap(), stored, "older readers take the cursor and ignore the seed");
    let offsets = vec![SourceOffset { partition: key, position }];
    let rows = [row("a", 40, 1), row("b", 45, 3), row("c", 47, 0)];
    let mut s = script(vec![page(&[]), page(&rows), page(&[]), page(&[])]);
    let mut task =
        SourceTask::open(&entries(&[("snow.overlap.seconds", "20"), ("snow.batch.size", "10")]), &offsets, &mut s, ManualClock::default())
            .unwrap();
    let mut keys = Vec::new();
    for _ in 0..3 {
        let batch = task.poll().unwrap();
        keys.extend((0..batch.records.len()).map(|i| batch.key_text(i).unwrap().to_string()));
    }
    assert_eq!(keys, ["b", "c"], "a's version was written by the old connector; b changed since");
}

fn probe_task((status, body): (u16, String)) -> Result<PollBatch, SnowError> {
    let mut s = script(vec![(status, body, None)]);
    let mut task = SourceTask::open(&entries(&[("snow.startup.probe", "true")]), &[], &mut s, ManualClock::default()).unwrap();
    task.poll()
}

#[test]
fn the_startup_probe_explains_what_to_fix() {
    let envelope = |m: &str| format!(r#"{{"error":{{"message":"{m}","detail":"d"}},"status":"failure"}}"#);
    let cases = [
        ((401, envelope("User Not Authenticated")), "startup probe: ServiceNow refused the integration user's login (check snow.auth.*"),
        ((403, envelope("User Not Authorized")), "startup probe: the integration user may not read table incident"),
        ((400, envelope("Invalid table incident")), "startup probe: ServiceNow rejected the read of table incident: check the table name"),
        ((404, envelope("Requested URI does not represent any resource")), "startup probe: the Table API answered 404 for table incident: check snow.instance.url"),
        ((200, r#"{"result":[{"sys_id":{"display_value":"a","value":"a"}}]}"#.to_string()), "snow.table.incident.timestamp.field: table incident has no readable field sys_updated_on"),
        (
            (200, r#"{"result":[{"sys_id":{"display_value":"a","value":"a"},"sys_updated_on":{"display_value":"2024-01-01 03:00:00","value":"2024-01-01 01:00:00"}}]}"#.to_string()),
            "snow.auth.username: the integration user's time zone is not UTC",
        ),
    ];
    for (answer, expected) in cases {
        let err = probe_task(answer).unwrap_err();
        assert!(err.to_string().contains(expected), "{err}\nexpected: {expected}");
        assert_eq!(err.class(), ErrorClass::Fatal);
    }
    let ok = r#"{"result":[{"sys_id":{"display_value":"a","value":"a"},"sys_updated_on":{"display_value":"01/01/2024 01:00:00 AM","value":"2024-01-01 01:00:00"}}]}"#;
    assert!(probe_task((200, ok.to_string())).unwrap().records.is_empty(), "a UTC user with another date format passes");
    assert!(probe_task((404, envelope("No Record found"))).is_ok(), "an empty table passes");
}

#[test]
fn the_lag_is_the_servers_clock_minus_what_has_surely_been_read() {
    // Server clock T0 + 100, safety lag 5 s: the sweep's high-water mark is T0 + 95.
    let mut s = script(vec![
        page(&[]),
        page_of(&[row("a", 1, 0), row("b", 2, 0)], 3),
        page(&[row("b", 2, 0), row("c", 50, 0)]),
        page(&[row("c", 50, 0)]),
        page(&[]),
        page(&[]),
        page(&[]),
    ]);
    let mut task = SourceTask::open(&entries(&[("snow.safety.lag.seconds", "5")]), &[], &mut s, ManualClock::default()).unwrap();
    assert_eq!(task.lag_seconds(), None, "no answer yet");
    let mut lags = Vec::new();
    loop {
        let batch = task.poll().unwrap();
        lags.push(task.lag_seconds().unwrap());
        if batch.next_poll_ms > 0 {
            break;
        }
    }
    assert_eq!(
        lags,
        [200, 99, 98, 50, 50, 50, 5],
        "from the start cursor, through a, b and c, to the high-water mark once the sweep is done"
    );
}

#[test]
fn a_wake_lets_the_next_sweep_read_up_to_the_notified_stamp_never_past_the_servers_clock() {
    // Server clock T0 + 100, safety lag 5 s: a timed sweep reads up to T0 + 95.
    let sweep = |wake: Option<i64>| {
        let mut s = script(vec![page(&[]), page(&[])]);
        let mut task = SourceTask::open(&entries(&[("snow.safety.lag.seconds", "5")]), &[], &mut s, ManualClock::default()).unwrap();
        if let Some(at) = wake {
            task.wake(&Timestamp(T0 + at).to_string()).unwrap();
        }
        task.poll().unwrap();
        task.poll().unwrap();
        drop(task);
        s.queries[1].clone()
    };
    let upto = |at: i64| format!("sys_updated_on<={}", Timestamp(T0 + at));
    assert!(sweep(None).contains(&upto(95)), "{}", sweep(None));
    assert!(sweep(Some(99)).contains(&upto(99)), "{}", sweep(Some(99)));
    assert!(sweep(Some(500)).contains(&upto(100)), "a stamp in the future reads no further than the server's clock: {}", sweep(Some(500)));
    assert!(sweep(Some(10)).contains(&upto(95)), "an old stamp changes nothing: {}", sweep(Some(10)));
    let mut s = script(vec![]);
    let mut task = SourceTask::open(&entries(&[]), &[], &mut s, ManualClock::default()).unwrap();
    let err = task.wake("yesterday").unwrap_err().to_string();
    assert!(err.contains("table incident: a wake-up's sys_updated_on"), "{err}");
}

#[test]
fn a_position_carries_at_most_the_newest_max_seen_versions_it_was_opened_with() {
    // A read-back of a busy overlap handed over more versions than an offset record may hold.
    let seen: Vec<crate::cursor::SeenVersion> = (0..6_000)
        .map(|i| crate::cursor::SeenVersion { ts: Timestamp(T0 + 10 + i % 50), id: format!("r{i:05}"), mod_count: "1".into() })
        .collect();
    let stored = Cursor { ts: Timestamp(T0 + 60), id: "z".into() }.to_position_with(&seen);
    let key = Partition::of("acme.service-now.com", &SourceConfig::parse(&entries(&[])).unwrap().tables[0]).key();
    let offsets = [SourceOffset { partition: key, position: stored }];
    let mut s = script(vec![page(&[]), page(&[row("n", 61, 0)])]);
    let config = entries(&[("snow.overlap.seconds", "60")]);
    let mut task = SourceTask::open(&config, &offsets, &mut s, ManualClock::default()).unwrap();
    task.poll().unwrap();
    let batch = task.poll().unwrap();
    let (_, carried) = Cursor::from_position_with_seen(&batch.offset.unwrap().position).unwrap();
    assert_eq!(carried.len(), crate::source::follower::MAX_SEEN, "capped");
    let oldest = carried.iter().map(|v| v.ts).min().unwrap();
    let dropped = seen.iter().filter(|v| v.ts < oldest).count();
    assert!(dropped >= 1_000 - 120, "the oldest went first ({dropped} older than the oldest kept)");
}
