//! Attachments: files attached on the instance reach the table's attachments topic with their
//! metadata and content (checked against the listed SHA-256), a file above
//! `attachments.max.bytes` as a reference with its size, never downloaded; files attached later
//! follow.
//!

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine;
use fake_snow::FakeSnow;
use serde_json::Value;
use sha2::Digest;

use crate::support::kafka::{Read, read_until};
use crate::support::{self, Runner, connector_file, now_secs, unique, work_dir};

const USER: &str = "attach-user";
const PASSWORD: &str = "Attach-Secret-Pw-9";

/// Attaches `size` bytes named `name` to row `row`; the attachment's sys_id.
fn attach(fake: &FakeSnow, row: &str, name: &str, size: usize) -> String {
    let content: Vec<u8> = (0..size).map(|i| (i * 7 + name.len()) as u8).collect();
    let file = fake_snow::attachment::File { table: "incident", row, name, content_type: "application/pdf", content };
    fake.shared().store().attach(file, now_secs(), "ann")
}

fn by_key(records: &[Read]) -> BTreeMap<String, Value> {
    records.iter().map(|r| (r.key.clone(), r.json())).collect()
}

#[test]
fn attachments_arrive_with_checked_content_and_a_large_one_as_a_reference() {
    let fake = support::fake_with_user(USER, PASSWORD, None);
    let rows = fake.shared().seed("incident", 30, now_secs() - 3600, 3000);
    let mut small: Vec<String> = (0..12).map(|i| attach(&fake, &rows[i], &format!("doc{i}.pdf"), 1000 + i * 5000)).collect();
    // 30 MB: over the limit, and over what the component's 64 MiB could hold with its base64.
    let large = attach(&fake, &rows[20], "scan.tiff", 30 << 20);
    let (name, topic) = (unique("attach"), unique("attach"));
    let files = format!("{topic}.attachments");
    let dir = work_dir("attachments");
    let mut c = support::source_entries(
        &fake.url(),
        &name,
        &topic,
        &["incident"],
        &[
            ("snow.auth.username", USER),
            ("snow.auth.password", PASSWORD),
            ("snow.table.incident.attachments", "true"),
            ("snow.startup.probe", "true"),
        ],
    );
    c.insert("component.memory.max.bytes".into(), (64u64 << 20).to_string());
    c.insert("snow.dedup.window.size".into(), "10000".into());
    c.insert("snow.hidden.window.max.rows".into(), "1000".into());
    let file = connector_file(&dir, &name, &c);
    let bootstrap = kafka_harness::shared().bootstrap();
    let long = Duration::from_secs(120);
    let runner = Runner::start(&dir, "run", &[&file]);
    let read = read_until(bootstrap, &files, long, |r| r.len() >= 13);
    assert_eq!(read.len(), 13, "each attachment once");
    let got = by_key(&read);
    for id in &small {
        let v = &got[id];
        assert_eq!(v["content_status"], "inline", "{id}");
        let content = base64::engine::general_purpose::STANDARD.decode(v["content"].as_str().unwrap()).unwrap();
        assert_eq!(content.as_slice(), fake.shared().store().file(id).unwrap(), "{id}: the file's bytes");
        let digest: String = sha2::Sha256::digest(&content).iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(v["hash"].as_str(), Some(digest.as_str()));
        assert_eq!(v["table_sys_id"].as_str().map(|r| rows.contains(&r.to_string())), Some(true));
    }
    let big = &got[&large];
    assert_eq!((big["content"].clone(), big["content_status"].as_str()), (Value::Null, Some("too_large")));
    assert_eq!(big["size_bytes"], (30u64 << 20).to_string());
    assert!(big["download_link"].as_str().unwrap().ends_with(&format!("/api/now/attachment/{large}/file")));
    assert_eq!(read[0].headers.get("snow.source.table").map(String::as_str), Some("sys_attachment"));
    let downloads = fake.journal().entries.iter().filter(|e| e.path.starts_with("/api/now/attachment/")).count();
    assert_eq!(downloads, 12, "the large file was never downloaded");

    // Files attached later follow.
    small.push(attach(&fake, &rows[3], "later.pdf", 4096));
    let more = read_until(bootstrap, &files, long, |r| r.len() >= 14);
    assert_eq!(more.last().unwrap().key, *small.last().unwrap());
    runner.stop();
}
