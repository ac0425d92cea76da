//! Attachments as an instance keeps them: a `sys_attachment` row per file (`table_name`,
//! `table_sys_id`, `file_name`, `content_type`, `size_bytes`, `hash` = the SHA-256 of the content
//! in hex, system fields), listed through the Table API like any table's rows (so its read ACLs
//! and faults apply), and the content served by `GET /api/now/attachment/{sys_id}/file` with its
//! `Content-Type`: 404 for a file that does not exist or that a read ACL hides, 403 when reads
//! of `sys_attachment` are denied.

use serde_json::Value;
use sha2::Digest;

use crate::server::{Answer, Shared};
use crate::store::{Row, Store};
use crate::table_api::envelope;

/// The table listing attachments.
pub const ATTACHMENTS: &str = "sys_attachment";

/// A file to attach to a row.
#[derive(Debug, Clone)]
pub struct File<'a> {
    /// The row's table.
    pub table: &'a str,
    /// The row's sys_id.
    pub row: &'a str,
    /// The file's name.
    pub name: &'a str,
    /// Its content type.
    pub content_type: &'a str,
    /// Its bytes.
    pub content: Vec<u8>,
}

impl Store {
    /// Attaches `file` at `now` by `user`; the attachment's sys_id.
    pub fn attach(&mut self, file: File<'_>, now: i64, user: &str) -> String {
        let File { table, row: table_sys_id, name: file_name, content_type, content } = file;
        let hash: String = sha2::Sha256::digest(&content).iter().map(|b| format!("{b:02x}")).collect();
        let mut row = Row::new();
        for (k, v) in [
            ("table_name", table.to_string()),
            ("table_sys_id", table_sys_id.to_string()),
            ("file_name", file_name.to_string()),
            ("content_type", content_type.to_string()),
            ("size_bytes", content.len().to_string()),
            ("hash", hash),
        ] {
            row.insert(k.into(), Value::String(v));
        }
        let id = self.insert(ATTACHMENTS, row, now, user)["sys_id"].as_str().unwrap_or_default().to_string();
        self.files.insert(id.clone(), content);
        id
    }

    /// The content of attachment `sys_id`, when it exists.
    pub fn file(&self, sys_id: &str) -> Option<&[u8]> {
        self.files.get(sys_id).map(Vec::as_slice)
    }
}

/// `GET /api/now/attachment/{sys_id}/file`.
pub fn serve_file(shared: &Shared, sys_id: &str) -> Answer {
    let store = shared.store();
    let Some(table) = store.table(ATTACHMENTS) else { return not_found() };
    if table.reads_denied() {
        return envelope(403, "Operation Failed", "ACL Exception Read operation failed on sys_attachment");
    }
    let (Some(row), Some(content)) = (table.get(sys_id), store.file(sys_id)) else { return not_found() };
    if table.acl().hides(sys_id, row) {
        return not_found();
    }
    let content_type = row.get("content_type").and_then(Value::as_str).unwrap_or("application/octet-stream").to_string();
    Answer { status: 200, headers: vec![("Content-Type".into(), content_type)], body: content.to_vec() }
}

fn not_found() -> Answer {
    envelope(404, "Record doesn't exist or ACL restricts the record retrieval", "")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_attachment_is_listed_with_its_size_and_sha256_and_its_file_is_served_unless_hidden() {
        let fake = crate::FakeSnow::start(crate::FakeOptions::default()).unwrap();
        let shared = fake.shared();
        let file = File { table: "incident", row: "r1", name: "a.txt", content_type: "text/plain", content: b"hello".to_vec() };
        let id = shared.store().attach(file, 100, "ann");
        let row = shared.store().table(ATTACHMENTS).unwrap().get(&id).unwrap().clone();
        assert_eq!((row["size_bytes"].as_str(), row["table_sys_id"].as_str()), (Some("5"), Some("r1")));
        assert_eq!(row["hash"], "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824");
        let served = serve_file(shared, &id);
        assert_eq!((served.status, served.body.as_slice()), (200, b"hello".as_slice()));
        assert_eq!(served.headers, [("Content-Type".to_string(), "text/plain".to_string())]);
        assert!(shared.hide_rows(ATTACHMENTS, [id.clone()]));
        assert_eq!(serve_file(shared, &id).status, 404, "a hidden file is not served");
        assert_eq!(serve_file(shared, "nope").status, 404);
    }
}
