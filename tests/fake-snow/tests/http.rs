//! The fake over real HTTP: auth, list shapes, writes, faults, journal.
#![allow(clippy::unwrap_used)] // a panic is how a test fails

use std::io::{Read, Write};
use std::net::TcpStream;

use fake_snow::{FakeOptions, FakeSnow, Fault, FaultAction};
use serde_json::Value;

/// One request on a fresh connection; returns (status, lower-cased header text, body). A dropped connection gives status 0.
fn call(fake: &FakeSnow, method: &str, path: &str, auth: Option<&str>, body: &str) -> (u16, String, String) {
    let mut s = TcpStream::connect(fake.addr()).unwrap();
    let auth = auth.map(|a| format!("Authorization: {a}\r\n")).unwrap_or_default();
    write!(s, "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{auth}Content-Length: {}\r\n\r\n{body}", body.len()).unwrap();
    let mut raw = String::new();
    let _ = s.read_to_string(&mut raw);
    if raw.is_empty() {
        return (0, String::new(), String::new());
    }
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    let status = head[9..12].parse().unwrap();
    (status, head.to_ascii_lowercase(), body.to_string())
}

const ADMIN: &str = "Basic YWRtaW46cHc="; // admin:pw

#[test]
fn table_api_faults_and_journal() {
    let fake = FakeSnow::start(FakeOptions {
        users: vec![("admin".into(), "pw".into())],
        tables: vec!["incident".into()],
        frozen_at: Some(1_704_067_200),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(call(&fake, "GET", "/api/now/table/incident", None, "").0, 401);
    let (status, head, body) = call(&fake, "GET", "/api/now/table/incident", Some(ADMIN), "");
    assert_eq!(status, 404, "v1 answers 404 for an empty match: {body}");
    assert!(head.contains("date: mon, 01 jan 2024 00:00:00 gmt"), "{head}");
    assert_eq!(call(&fake, "GET", "/api/now/v2/table/incident", Some(ADMIN), "").2, r#"{"result":[]}"#);
    assert_eq!(call(&fake, "GET", "/api/now/table/nope", Some(ADMIN), "").0, 400);

    let (status, head, body) = call(&fake, "POST", "/api/now/table/incident", Some(ADMIN), r#"{"short_description":"x"}"#);
    assert_eq!(status, 201);
    assert!(head.contains("location: http://127.0.0.1:"));
    let created: Value = serde_json::from_str(&body).unwrap();
    let id = created["result"]["sys_id"].as_str().unwrap().to_string();
    assert_eq!(created["result"]["sys_updated_on"], "2024-01-01 00:00:00");
    fake.clock().advance(5);
    let (status, _, body) = call(&fake, "PATCH", &format!("/api/now/table/incident/{id}"), Some(ADMIN), r#"{"state":"2"}"#);
    assert_eq!(status, 200);
    let patched: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (patched["result"]["sys_mod_count"].as_str(), patched["result"]["sys_updated_on"].as_str()),
        (Some("1"), Some("2024-01-01 00:00:05"))
    );

    let query = "sysparm_query=sys_updated_on%3E2024-01-01%2000%3A00%3A00%5EORDERBYsys_updated_on%5EORDERBYsys_id&sysparm_fields=sys_id%2Cstate&sysparm_no_count=true";
    let (status, head, body) = call(&fake, "GET", &format!("/api/now/table/incident?{query}"), Some(ADMIN), "");
    assert_eq!(status, 200);
    assert!(!head.contains("x-total-count"));
    assert_eq!(body, format!(r#"{{"result":[{{"state":"2","sys_id":"{id}"}}]}}"#), "fields as asked, keys in the fake's (sorted) order");

    fake.add_fault(Fault::always(FaultAction::Status { status: 429, retry_after: Some("3".into()) }).on_method("GET").times(1));
    let (status, head, body) = call(&fake, "GET", "/api/now/table/incident", Some(ADMIN), "");
    assert_eq!(status, 429);
    assert!(head.contains("retry-after: 3") && body.contains(r#""status":"failure""#));
    fake.add_fault(Fault::always(FaultAction::DropConnection).times(1));
    assert_eq!(call(&fake, "GET", "/api/now/table/incident", Some(ADMIN), "").0, 0);
    assert_eq!(call(&fake, "DELETE", &format!("/api/now/table/incident/{id}"), Some(ADMIN), "").0, 204);

    let journal = fake.journal();
    let statuses: Vec<u16> = journal.entries.iter().map(|e| e.status).collect();
    assert_eq!(statuses, [401, 404, 200, 400, 201, 200, 200, 429, 0, 204]);
    assert_eq!(journal.entries[1].auth, "basic:admin");
    assert!(journal.max_in_flight >= 1);
}

#[test]
fn seeding_in_one_second_and_admin_api() {
    let fake = FakeSnow::start(FakeOptions::default()).unwrap();
    let (status, _, body) = call(&fake, "POST", "/__fake/tables/incident/seed", None, r#"{"count":3,"at":"2024-01-01 00:00:00"}"#);
    assert_eq!(status, 200, "{body}");
    let rows = fake.rows("incident");
    assert_eq!(rows.len(), 3);
    assert!(rows.iter().all(|r| r["sys_updated_on"] == "2024-01-01 00:00:00"));
    assert!(rows[0].len() >= 40, "incident shape has about 40 fields, got {}", rows[0].len());
    let row_bytes = serde_json::to_vec(&rows[0]).unwrap().len();
    assert!((700..1500).contains(&row_bytes), "about 1 KB per row, got {row_bytes}");
    assert_eq!(call(&fake, "POST", "/__fake/clock", None, r#"{"set":"2024-02-01 00:00:00"}"#).0, 200);
    assert!(call(&fake, "GET", "/__fake/clock", None, "").2.contains("2024-02-01 00:00:00"));
    assert_eq!(call(&fake, "POST", "/__fake/faults", None, r#"{"action":{"latency":{"ms":10}},"times":1}"#).0, 200);
    assert_eq!(call(&fake, "GET", "/__fake/journal", None, "").0, 200);
}

#[test]
fn acls_drop_hidden_rows_after_the_window_is_read_and_the_headers_say_what_follows() {
    let fake = FakeSnow::start(FakeOptions::default()).unwrap();
    let (_, _, body) = call(&fake, "POST", "/__fake/tables/incident/seed", None, r#"{"count":10,"at":"2024-01-01 00:00:00"}"#);
    let seeded: Value = serde_json::from_str(&body).unwrap();
    let mut ids: Vec<String> = seeded["sys_ids"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect();
    ids.sort();
    let hide = format!(r#"{{"sys_ids":["{}","{}"]}}"#, ids[2], ids[3]);
    assert_eq!(call(&fake, "POST", "/__fake/tables/incident/hidden", None, &hide).0, 200);
    let list = |extra: &str| {
        let (status, head, body) =
            call(&fake, "GET", &format!("/api/now/table/incident?sysparm_query=ORDERBYsys_id&sysparm_fields=sys_id{extra}"), None, "");
        let got: Vec<String> = serde_json::from_str::<Value>(&body)
            .ok()
            .and_then(|v| v["result"].as_array().cloned())
            .unwrap_or_default()
            .iter()
            .map(|r| r["sys_id"].as_str().unwrap().to_string())
            .collect();
        (status, head, got)
    };
    let (status, head, got) = list("&sysparm_limit=4");
    assert_eq!((status, got), (200, vec![ids[0].clone(), ids[1].clone()]), "the window of 4 is read first, then 2 hidden rows dropped");
    assert!(head.contains("x-total-count: 10"), "counted before ACLs: {head}");
    assert!(head.contains(r#"sysparm_offset=4>;rel="next""#) && head.contains(r#"sysparm_offset=-4>;rel="prev""#), "{head}");
    let (_, head, got) = list("&sysparm_limit=4&sysparm_offset=8&sysparm_no_count=true");
    assert_eq!(got, ids[8..].to_vec());
    assert!(!head.contains("x-total-count") && !head.contains(r#"rel="next""#), "nothing follows the last window: {head}");
    let (_, head, got) = list("&sysparm_limit=2&sysparm_offset=2&sysparm_suppress_pagination_header=true");
    assert!(got.is_empty(), "a window of hidden rows comes back empty");
    assert!(head.contains("x-total-count: 10") && !head.contains("link:"), "{head}");
    assert_eq!(call(&fake, "GET", &format!("/api/now/table/incident/{}", ids[2]), None, "").0, 404, "a hidden row is not found");
    assert_eq!(call(&fake, "POST", "/__fake/settings", None, r#"{"pagination_headers":false}"#).0, 200);
    let (_, head, _) = list("&sysparm_limit=4");
    assert!(!head.contains("x-total-count") && !head.contains("link:"), "switched off: {head}");
    assert_eq!(call(&fake, "POST", "/__fake/tables/incident/hidden", None, r#"{"query":"sys_idSTARTSWITH0"}"#).0, 200);
    assert_eq!(call(&fake, "DELETE", "/__fake/tables/incident/hidden", None, "").0, 200);
    assert_eq!(list("&sysparm_limit=4").2, ids[..4].to_vec(), "every row readable again");
}

#[test]
fn the_served_log_keeps_each_list_answers_versions_and_when_each_version_stopped_being_current() {
    let fake = FakeSnow::start(FakeOptions {
        users: vec![("admin".into(), "pw".into())],
        tables: vec!["incident".into()],
        frozen_at: Some(1_704_067_200),
        ..Default::default()
    })
    .unwrap();
    let ids = fake.shared().seed("incident", 3, 1_704_067_000, 3);
    // Off by default: nothing is kept.
    assert_eq!(call(&fake, "GET", "/api/now/table/incident", Some(ADMIN), "").0, 200);
    assert!(fake.served().is_empty());
    fake.record_served(true);
    fake.shared().hide_rows("incident", [ids[1].clone()]);
    assert_eq!(call(&fake, "GET", "/api/now/table/incident?sysparm_fields=number", Some(ADMIN), "").0, 200);
    let served = fake.served();
    assert_eq!(served.len(), 1);
    let versions: Vec<(&str, &str)> = served[0].versions.iter().map(|v| (v.sys_id.as_str(), v.mod_count.as_str())).collect();
    // The hidden row is not in the answer, so not in the log; sys_fields are logged though not asked for.
    assert_eq!(versions.len(), 2, "{versions:?}");
    assert!(!versions.iter().any(|(id, _)| *id == ids[1]));
    for v in &served[0].versions {
        assert_eq!(fake.shared().version_of("incident", &v.sys_id), Some((v.ts.clone(), v.sys_id.clone(), v.mod_count.clone())));
    }
    assert_eq!(fake.superseded_at("incident", &ids[0], "0"), None, "current");
    let mut changes = serde_json::Map::new();
    changes.insert("state".into(), Value::String("2".into()));
    let before = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    fake.shared().update_rows("incident", &ids[..1], &changes);
    let gone = fake.superseded_at("incident", &ids[0], "0").expect("version 0 was superseded");
    assert!(gone >= before, "{gone} >= {before}");
    assert_eq!(fake.superseded_at("incident", &ids[0], "1"), None);
    assert_eq!(call(&fake, "DELETE", &format!("/api/now/table/incident/{}", ids[2]), Some(ADMIN), "").0, 204);
    assert!(fake.superseded_at("incident", &ids[2], "0").is_some(), "a delete ends a version too");
}

/// Accepts `count` posts on a local port; returns its URL and a handle yielding each post's
/// (headers lower-cased, body).
fn receiver(count: usize) -> (String, std::thread::JoinHandle<Vec<(String, String)>>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/snow/push/c1", listener.local_addr().unwrap());
    let handle = std::thread::spawn(move || {
        let mut posts = Vec::new();
        for stream in listener.incoming().take(count) {
            let mut stream = stream.unwrap();
            let mut raw = Vec::new();
            let mut buf = [0u8; 4096];
            // Read the head, then as many body bytes as Content-Length says.
            loop {
                let n = stream.read(&mut buf).unwrap();
                raw.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&raw).to_string();
                if let Some((head, body)) = text.split_once("\r\n\r\n") {
                    let length: usize = head
                        .lines()
                        .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap()))
                        .unwrap_or(0);
                    if body.len() >= length || n == 0 {
                        posts.push((head.to_ascii_lowercase(), body.to_string()));
                        break;
                    }
                }
            }
            stream.write_all(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").unwrap();
        }
        posts
    });
    (url, handle)
}

#[test]
fn the_business_rule_posts_each_committed_write_signed_after_its_delay_and_loses_or_repeats_as_told() {
    let fake =
        FakeSnow::start(FakeOptions { users: vec![("admin".into(), "pw".into())], tables: vec!["incident".into()], ..Default::default() })
            .unwrap();
    let (url, posts) = receiver(4);
    let rule = fake_snow::push::PushRule {
        url,
        secret: b"s3cret".to_vec(),
        delay_ms: 200,
        loss: 0.0,
        duplicate: 1.0,
        tables: vec!["incident".into()],
    };
    let started = std::time::Instant::now();
    let pusher = fake.shared().set_push_rule(Some(rule)).unwrap();
    let ids = fake.shared().seed("incident", 1, 1_704_067_000, 1);
    fake.shared().delete_rows("incident", &ids);
    let posts = posts.join().unwrap();
    assert!(started.elapsed() >= std::time::Duration::from_millis(200), "posted after the delay");
    assert_eq!(posts.len(), 4, "two writes (insert, delete), each posted twice");
    for (head, body) in &posts {
        let ts = head.lines().find_map(|l| l.strip_prefix("x-snow-push-timestamp: ")).unwrap();
        let signature = head.lines().find_map(|l| l.strip_prefix("x-snow-push-signature: v1=")).unwrap();
        let mac: String =
            fake_snow::push::hmac_sha256(b"s3cret", format!("{ts}.{body}").as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(signature, mac);
        let v: Value = serde_json::from_str(body).unwrap();
        assert_eq!((v["table"].as_str(), v["sys_id"].as_str()), (Some("incident"), Some(ids[0].as_str())));
        assert!(head.starts_with("post /snow/push/c1 http/1.1"), "{head}");
    }
    assert_eq!(pusher.counts().writes, 2);
    // Every notification lost: nothing is posted.
    let lossy = fake_snow::push::PushRule {
        url: "http://127.0.0.1:9/x".into(),
        secret: vec![],
        delay_ms: 0,
        loss: 1.0,
        duplicate: 0.0,
        tables: vec![],
    };
    let pusher = fake.shared().set_push_rule(Some(lossy)).unwrap();
    fake.shared().seed("incident", 3, 1_704_067_000, 1);
    let counts = pusher.counts();
    assert_eq!((counts.writes, counts.lost, counts.posted), (3, 3, 0));
}
