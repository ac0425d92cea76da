//! The notification endpoint, `POST /snow/push/<connector>`: a request is read (its body capped
//! at [`MAX_BODY_BYTES`] and [`BODY_READ`]), its signature and timestamp checked with the
//! connector's secret, what it names read, and the tables it names handed to the [`Reception`]:
//! a standalone run's own units ([`Wakes`]), or a fleet's wake topic
//! (`crate::worker::push`). Every answer is counted: `snow_push_accepted_total{connector}` or
//! `snow_push_refused_total{connector,reason}` (`connector` is empty for a name that takes no
//! notifications here, so made-up names cannot grow the metrics). A refusal is 4xx with its
//! reason and wakes nothing; the body is never logged.

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use snow_core::time::Timestamp;

use super::Refusal;
use super::notification::{self, MAX_BODY_BYTES};
use super::wakes::Wakes;
use crate::config::push::PushSpec;
use crate::metrics::{Metrics, labels};

/// The path's prefix; the connector's name follows it.
pub const PATH_PREFIX: &str = "/snow/push/";

/// The time a sender has to send a body once its headers arrived.
pub const BODY_READ: Duration = Duration::from_secs(10);

/// The timestamp header.
pub const TIMESTAMP_HEADER: &str = "x-snow-push-timestamp";
/// The signature header.
pub const SIGNATURE_HEADER: &str = "x-snow-push-signature";

/// A boxed future of a [`Reception`]'s.
pub type Pending<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A connector that takes notifications: its settings and the tables it reads.
#[derive(Debug, Clone)]
pub struct Door {
    /// Its `snow.push.*` settings (the secret among them).
    pub spec: Arc<PushSpec>,
    /// The tables it reads.
    pub tables: BTreeSet<String>,
}

/// Where notifications go once checked.
pub trait Reception: Send + Sync {
    /// The connector's door, when it takes notifications here.
    fn door<'a>(&'a self, connector: &'a str) -> Pending<'a, Option<Door>>;
    /// Wakes `connector`'s `table` with `ts` (or has it woken where it runs), unless refused.
    fn deliver<'a>(&'a self, connector: &'a str, door: &'a Door, table: &'a str, ts: Timestamp) -> Pending<'a, Result<(), Refusal>>;
}

impl Reception for Wakes {
    fn door<'a>(&'a self, connector: &'a str) -> Pending<'a, Option<Door>> {
        Box::pin(async move { self.spec(connector).map(|spec| Door { spec, tables: self.tables_of(connector) }) })
    }

    fn deliver<'a>(&'a self, connector: &'a str, _door: &'a Door, table: &'a str, ts: Timestamp) -> Pending<'a, Result<(), Refusal>> {
        Box::pin(async move { self.wake(connector, table, ts) })
    }
}

/// Takes notifications for the connectors its [`Reception`] knows.
#[derive(Clone)]
pub struct Endpoint {
    reception: Arc<dyn Reception>,
    metrics: Metrics,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint").finish_non_exhaustive()
    }
}

/// What an accepted notification did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taken {
    /// The tables woken.
    pub woken: Vec<String>,
}

impl Endpoint {
    /// An endpoint handing notifications to `reception`, counting in `metrics`.
    pub fn new(reception: Arc<dyn Reception>, metrics: Metrics) -> Self {
        Self { reception, metrics }
    }

    /// The connector a request's path names, when it is a push path.
    pub fn connector_of(path: &str) -> Option<&str> {
        path.strip_prefix(PATH_PREFIX).filter(|c| !c.is_empty() && !c.contains('/'))
    }

    /// Answers a request to `connector`'s push path.
    pub async fn answer(&self, connector: &str, request: http::Request<Incoming>) -> Response<Full<Bytes>> {
        let (parts, body) = request.into_parts();
        let read = if parts.method != Method::POST {
            Err(Refusal::WrongMethod)
        } else if content_length(&parts.headers).is_some_and(|n| n > MAX_BODY_BYTES as u64) {
            Err(Refusal::TooLarge)
        } else {
            match tokio::time::timeout(BODY_READ, Limited::new(body, MAX_BODY_BYTES).collect()).await {
                Ok(Ok(collected)) => Ok(collected.to_bytes()),
                Ok(Err(_)) => Err(Refusal::TooLarge),
                Err(_) => Err(Refusal::Malformed),
            }
        };
        let header = |name: &str| parts.headers.get(name).and_then(|v| v.to_str().ok());
        let outcome = match read {
            Ok(body) => self.take(connector, header(TIMESTAMP_HEADER), header(SIGNATURE_HEADER), &body, unix_now()).await,
            Err(refusal) => {
                let door = self.reception.door(connector).await;
                self.count(connector, door.is_some(), Err(refusal));
                Err(refusal)
            }
        };
        match outcome {
            Ok(taken) => json(StatusCode::ACCEPTED, serde_json::json!({ "woken": taken.woken })),
            Err(refusal) => {
                let status = StatusCode::from_u16(refusal.status()).unwrap_or(StatusCode::BAD_REQUEST);
                json(status, serde_json::json!({ "error": refusal.answered() }))
            }
        }
    }

    /// Checks a notification's headers and `body` for `connector` at the host's clock `now`
    /// (Unix seconds) and hands the tables it names on; counts the outcome.
    pub async fn take(
        &self,
        connector: &str,
        timestamp: Option<&str>,
        signature: Option<&str>,
        body: &[u8],
        now: i64,
    ) -> Result<Taken, Refusal> {
        let door = self.reception.door(connector).await;
        let outcome = match &door {
            Some(door) => self.check_and_deliver(connector, door, timestamp, signature, body, now).await,
            None => Err(Refusal::UnknownConnector),
        };
        self.count(connector, door.is_some(), outcome.as_ref().map(drop).map_err(|r| *r));
        outcome
    }

    /// Counts an answer to `connector`'s path (labelled with the name only when it takes
    /// notifications here).
    fn count(&self, connector: &str, known: bool, outcome: Result<(), Refusal>) {
        match outcome {
            Ok(()) => self.metrics.counter_add("snow_push_accepted_total", 1, &labels(&[("connector", connector)])),
            Err(refusal) => {
                let label = if known { connector } else { "" };
                self.metrics.counter_add("snow_push_refused_total", 1, &labels(&[("connector", label), ("reason", refusal.reason())]));
                tracing::debug!(connector = label, reason = refusal.reason(), "a push notification was refused");
            }
        }
    }

    async fn check_and_deliver(
        &self,
        connector: &str,
        door: &Door,
        timestamp: Option<&str>,
        signature: Option<&str>,
        body: &[u8],
        now: i64,
    ) -> Result<Taken, Refusal> {
        if body.len() > MAX_BODY_BYTES {
            return Err(Refusal::TooLarge);
        }
        super::signature::verify(door.spec.secret.expose().as_bytes(), timestamp, signature, body, now, door.spec.max_skew_seconds)?;
        let named = notification::read(body)?;
        if named.iter().any(|(table, _)| !door.tables.contains(table)) {
            return Err(Refusal::UnknownTable);
        }
        let mut woken = Vec::new();
        let mut refused = None;
        for (table, ts) in named {
            match self.reception.deliver(connector, door, &table, ts).await {
                Ok(()) => woken.push(table),
                Err(refusal) => refused = Some(refusal),
            }
        }
        match refused {
            // Every table named was refused (over its rate): nothing was woken.
            Some(refusal) if woken.is_empty() => Err(refusal),
            _ => Ok(Taken { woken }),
        }
    }
}

fn content_length(headers: &http::HeaderMap) -> Option<u64> {
    headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse().ok())
}

fn unix_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

fn json(status: StatusCode, body: serde_json::Value) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static("application/json"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::push::signature::sign;

    const NOW: i64 = 1_780_000_000;

    fn endpoint() -> (Endpoint, Arc<Wakes>, Metrics) {
        let (wakes, metrics) = (Arc::new(Wakes::default()), Metrics::default());
        (Endpoint::new(wakes.clone(), metrics.clone()), wakes, metrics)
    }

    fn signed(body: &[u8], at: i64) -> (String, String) {
        (at.to_string(), sign(b"a-long-random-shared-secret", at, body))
    }

    fn refused(metrics: &Metrics, connector: &str, reason: &str) -> f64 {
        metrics.sum("snow_push_refused_total", &[("connector", connector), ("reason", reason)])
    }

    #[tokio::test]
    async fn a_signed_notification_wakes_its_table_and_anything_else_is_refused_and_counted() {
        let (endpoint, wakes, metrics) = endpoint();
        let registration = wakes.register("c", "incident", crate::push::wakes::tests::spec(100));
        let body = br#"{"table":"incident","sys_id":"a1","sys_updated_on":"2026-06-01 10:00:07"}"#;
        let (ts, sig) = signed(body, NOW);
        let take = async |connector: &str, ts: &str, sig: &str, body: &[u8]| endpoint.take(connector, Some(ts), Some(sig), body, NOW).await;
        assert_eq!(take("c", &ts, &sig, body).await, Ok(Taken { woken: vec!["incident".into()] }));
        assert_eq!(registration.wake().take(), Some(Timestamp::parse("2026-06-01 10:00:07").unwrap()));
        assert_eq!(metrics.sum("snow_push_accepted_total", &[("connector", "c")]), 1.0);

        assert_eq!(take("c", &ts, "v1=00", body).await, Err(Refusal::Unsigned), "not a MAC");
        assert_eq!(take("c", &ts, &signed(b"other", NOW).1, body).await, Err(Refusal::BadSignature), "forged");
        let (old_ts, old_sig) = signed(body, NOW - 301);
        assert_eq!(take("c", &old_ts, &old_sig, body).await, Err(Refusal::Stale), "replayed");
        assert_eq!(take("nobody", &ts, &sig, body).await, Err(Refusal::UnknownConnector));
        let other = br#"{"table":"problem","sys_updated_on":"2026-06-01 10:00:07"}"#;
        let (ots, osig) = signed(other, NOW);
        assert_eq!(take("c", &ots, &osig, other).await, Err(Refusal::UnknownTable));
        let junk = b"table=incident";
        let (jts, jsig) = signed(junk, NOW);
        assert_eq!(take("c", &jts, &jsig, junk).await, Err(Refusal::Malformed));
        let huge = vec![b' '; MAX_BODY_BYTES + 1];
        assert_eq!(take("c", &ts, &sig, &huge).await, Err(Refusal::TooLarge));
        assert_eq!(registration.wake().take(), None, "no refusal woke anything");
        for (reason, count) in
            [("unsigned", 1.0), ("bad_signature", 1.0), ("stale", 1.0), ("unknown_table", 1.0), ("malformed", 1.0), ("too_large", 1.0)]
        {
            assert_eq!(refused(&metrics, "c", reason), count, "{reason}");
        }
        assert_eq!(refused(&metrics, "", "unknown_connector"), 1.0, "a made-up connector name is not a label");
        assert_eq!(metrics.sum("snow_push_refused_total", &[("connector", "nobody")]), 0.0);
    }

    #[tokio::test]
    async fn a_flood_is_refused_past_the_rate_and_leaves_one_wake_up() {
        let (endpoint, wakes, metrics) = endpoint();
        let registration = wakes.register("c", "incident", crate::push::wakes::tests::spec(10));
        let body = br#"{"table":"incident","sys_updated_on":"2026-06-01 10:00:07"}"#;
        let (ts, sig) = signed(body, NOW);
        let mut accepted = 0;
        for _ in 0..100 {
            accepted += usize::from(endpoint.take("c", Some(&ts), Some(&sig), body, NOW).await.is_ok());
        }
        assert!((10..=11).contains(&accepted), "the bucket's ten, perhaps one refilled: {accepted}");
        assert_eq!(refused(&metrics, "c", "rate_limited"), (100 - accepted) as f64);
        assert!(registration.wake().take().is_some());
        assert_eq!(registration.wake().take(), None, "one wake-up for the flood");
    }
}
