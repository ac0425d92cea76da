//! The instance's after-commit business rule (ADR 0032), as the fake runs it: after each
//! committed write (insert, update, delete) of a table it is set for, it posts
//! `{"table","sys_id","sys_updated_on"}` to a URL, signed as `docs/push.md` says
//! (`X-Snow-Push-Timestamp`, `X-Snow-Push-Signature: v1=<hex HMAC-SHA256 of "<ts>.<body>">`),
//! after a delay, losing or duplicating a share of them on purpose. A thread posts them in
//! order of their due time, so a write never waits for the post.
//!
//! The HMAC here is written independently of the host's (a fake that shared the host's code
//! would hide a mistake in it); both are checked against RFC 4231's vectors.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How the rule behaves.
#[derive(Debug, Clone, PartialEq)]
pub struct PushRule {
    /// Where it posts: `http://host:port/path`.
    pub url: String,
    /// The shared secret.
    pub secret: Vec<u8>,
    /// How long after the commit a notification is posted (an async rule's scheduler delay).
    pub delay_ms: u64,
    /// The share of notifications never posted (0.0–1.0).
    pub loss: f64,
    /// The share posted twice.
    pub duplicate: f64,
    /// The tables it is set for (empty: every table but `sys_` ones).
    pub tables: Vec<String>,
}

/// What the rule did so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PushCounts {
    /// Writes the rule saw.
    pub writes: u64,
    /// Notifications lost on purpose.
    pub lost: u64,
    /// Posts made (duplicates included).
    pub posted: u64,
    /// Posts the endpoint did not answer 2xx (or that failed to connect).
    pub failed: u64,
}

struct Pending {
    due: Instant,
    body: String,
    copies: u32,
}

/// The running rule: a channel to its posting thread.
pub struct Pusher {
    rule: PushRule,
    tx: Mutex<mpsc::Sender<Pending>>,
    rng: AtomicU64,
    writes: AtomicU64,
    lost: AtomicU64,
    counts: std::sync::Arc<(AtomicU64, AtomicU64)>,
}

impl std::fmt::Debug for Pusher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pusher").field("url", &self.rule.url).finish_non_exhaustive()
    }
}

impl Pusher {
    /// Starts the posting thread of `rule`.
    pub fn start(rule: PushRule) -> Self {
        let (tx, rx) = mpsc::channel::<Pending>();
        let counts = std::sync::Arc::new((AtomicU64::new(0), AtomicU64::new(0)));
        let (thread_rule, thread_counts) = (rule.clone(), counts.clone());
        std::thread::Builder::new()
            .name("fake-snow-push".into())
            .spawn(move || {
                for pending in rx {
                    let wait = pending.due.saturating_duration_since(Instant::now());
                    std::thread::sleep(wait);
                    for _ in 0..pending.copies {
                        let ok = post(&thread_rule, &pending.body);
                        thread_counts.0.fetch_add(1, Ordering::SeqCst);
                        if !ok {
                            thread_counts.1.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                }
            })
            .expect("starting the push thread");
        Self {
            rule,
            tx: Mutex::new(tx),
            rng: AtomicU64::new(0x2545_f491_4f6c_dd1d),
            writes: AtomicU64::default(),
            lost: AtomicU64::default(),
            counts,
        }
    }

    /// After a committed write of `table`'s row `sys_id`, now stamped `sys_updated_on`.
    pub fn committed(&self, table: &str, sys_id: &str, sys_updated_on: &str) {
        let wanted = if self.rule.tables.is_empty() { !table.starts_with("sys_") } else { self.rule.tables.iter().any(|t| t == table) };
        if !wanted {
            return;
        }
        self.writes.fetch_add(1, Ordering::SeqCst);
        if self.chance() < self.rule.loss {
            self.lost.fetch_add(1, Ordering::SeqCst);
            return;
        }
        let copies = if self.chance() < self.rule.duplicate { 2 } else { 1 };
        let body = serde_json::json!({ "table": table, "sys_id": sys_id, "sys_updated_on": sys_updated_on }).to_string();
        let pending = Pending { due: Instant::now() + Duration::from_millis(self.rule.delay_ms), body, copies };
        let _ = self.tx.lock().unwrap_or_else(|e| e.into_inner()).send(pending);
    }

    /// What the rule did so far.
    pub fn counts(&self) -> PushCounts {
        PushCounts {
            writes: self.writes.load(Ordering::SeqCst),
            lost: self.lost.load(Ordering::SeqCst),
            posted: self.counts.0.load(Ordering::SeqCst),
            failed: self.counts.1.load(Ordering::SeqCst),
        }
    }

    /// A number in [0, 1) (xorshift; the same sequence every run).
    fn chance(&self) -> f64 {
        let mut x = self.rng.load(Ordering::SeqCst);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng.store(x, Ordering::SeqCst);
        (x >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Posts `body` to the rule's URL; whether the endpoint answered 2xx.
fn post(rule: &PushRule, body: &str) -> bool {
    let Some(rest) = rule.url.strip_prefix("http://") else { return false };
    let (authority, path) = rest.split_once('/').map_or((rest, "/".to_string()), |(a, p)| (a, format!("/{p}")));
    let Ok(mut stream) = TcpStream::connect(authority) else { return false };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let timestamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let mac = hmac_sha256(&rule.secret, format!("{timestamp}.{body}").as_bytes());
    let signature: String = mac.iter().map(|b| format!("{b:02x}")).collect();
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         X-Snow-Push-Timestamp: {timestamp}\r\nX-Snow-Push-Signature: v1={signature}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer.get(9..10) == Some("2")
}

/// HMAC-SHA256 (RFC 2104), written for the fake.
pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    let mut k = [0u8; 64];
    if key.len() > 64 {
        k[..32].copy_from_slice(&sha2::Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let mut inner = sha2::Sha256::new();
    inner.update(k.iter().map(|b| b ^ 0x36).collect::<Vec<u8>>());
    inner.update(message);
    let mut outer = sha2::Sha256::new();
    outer.update(k.iter().map(|b| b ^ 0x5c).collect::<Vec<u8>>());
    outer.update(inner.finalize());
    outer.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc_4231_case_2() {
        let hex: String = hmac_sha256(b"Jefe", b"what do ya want for nothing?").iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    }
}
