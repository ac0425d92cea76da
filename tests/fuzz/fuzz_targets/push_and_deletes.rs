//! What arrives from outside with push notifications and deletes: a notification's body and
//! headers (ADR 0032) and a `sys_audit_delete` payload (ADR 0031). Any bytes are read or refused
//! with a reason, never a panic; what is read holds what the readers promise.
#![no_main]

use libfuzzer_sys::fuzz_target;
use snow_core::source::audit_payload;
use snow_runtime::push::{notification, signature};

fuzz_target!(|data: &[u8]| {
    if let Ok(tables) = notification::read(data) {
        assert!(!tables.is_empty() && data.len() <= notification::MAX_BODY_BYTES);
        assert!(tables.iter().all(|(table, _)| !table.is_empty()));
    }
    // The first line as the headers, the rest as the body: verified or refused, never a panic.
    let text = String::from_utf8_lossy(data);
    let (head, body) = text.split_once('\n').unwrap_or((&text, ""));
    let (timestamp, sig) = head.split_once(' ').unwrap_or((head, head));
    let _ = signature::verify(b"secret", Some(timestamp), Some(sig), body.as_bytes(), 1_700_000_000, 300);
    if let Some(fields) = audit_payload::fields(&text, "incident") {
        assert!(fields.values().all(serde_json::Value::is_string));
    }
});
