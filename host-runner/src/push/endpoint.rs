//! The notification endpoint, `POST /snow/push/<connector>`: a request is read (its body capped
//! at [`MAX_BODY_BYTES`] and [`BODY_READ`]), its signature and timestamp checked with the
//! connector's secret, what it names read, and the tables it names woken. Every answer is
//! counted: `snow_push_accepted_total{connector}` or `snow_push_refused_total{connector,reason}`
//! (`connector` is empty for a name no table runs under here, so made-up names cannot grow the
//! metrics). A refusal is 4xx with its reason and wakes nothing; the body is never logged.
//!
//! Served by a standalone run's `snow.push.listen` ([`super::listen`]).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;

use super::Refusal;
use super::notification::{self, MAX_BODY_BYTES};
use super::wakes::Wakes;
use crate::metrics::{Metrics, labels};

/// The path's prefix; the connector's name follows it.
pub const PATH_PREFIX: &str = "/snow/push/";

/// The time a sender has to send a body once its headers arrived.
pub const BODY_READ: Duration = Duration::from_secs(10);

/// The timestamp header.
pub const TIMESTAMP_HEADER: &str = "x-snow-push-timestamp";
/// The signature header.
pub const SIGNATURE_HEADER: &str = "x-snow-push-signature";

/// Takes notifications for every connector whose tables run in this process.
#[derive(Debug, Clone)]
pub struct Endpoint {
    wakes: Arc<Wakes>,
    metrics: Metrics,
}

/// What an accepted notification did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taken {
    /// The tables woken.
    pub woken: Vec<String>,
}

impl Endpoint {
    /// An endpoint waking `wakes`' tables, counting in `metrics`.
    pub fn new(wakes: Arc<Wakes>, metrics: Metrics) -> Self {
        Self { wakes, metrics }
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
        let outcome = match read {
            Ok(body) => {
                let header = |name: &str| parts.headers.get(name).and_then(|v| v.to_str().ok());
                self.take(connector, header(TIMESTAMP_HEADER), header(SIGNATURE_HEADER), &body, unix_now())
            }
            Err(refusal) => {
                self.count(connector, Err(refusal));
                Err(refusal)
            }
        };
        match outcome {
            Ok(taken) => json(StatusCode::ACCEPTED, serde_json::json!({ "woken": taken.woken })),
            Err(refusal) => {
                let status = StatusCode::from_u16(refusal.status()).unwrap_or(StatusCode::BAD_REQUEST);
                json(status, serde_json::json!({ "error": refusal.reason() }))
            }
        }
    }

    /// Checks a notification's headers and `body` for `connector` at the host's clock `now`
    /// (Unix seconds) and wakes the tables it names; counts the outcome.
    pub fn take(&self, connector: &str, timestamp: Option<&str>, signature: Option<&str>, body: &[u8], now: i64) -> Result<Taken, Refusal> {
        let outcome = self.check_and_wake(connector, timestamp, signature, body, now);
        self.count(connector, outcome.as_ref().map(drop).map_err(|r| *r));
        outcome
    }

    /// Counts an answer to `connector`'s path (labelled with the name only when one of its tables
    /// runs here).
    fn count(&self, connector: &str, outcome: Result<(), Refusal>) {
        match outcome {
            Ok(()) => self.metrics.counter_add("snow_push_accepted_total", 1, &labels(&[("connector", connector)])),
            Err(refusal) => {
                let known = if self.wakes.spec(connector).is_some() { connector } else { "" };
                self.metrics.counter_add("snow_push_refused_total", 1, &labels(&[("connector", known), ("reason", refusal.reason())]));
                tracing::debug!(connector = known, reason = refusal.reason(), "a push notification was refused");
            }
        }
    }

    fn check_and_wake(
        &self,
        connector: &str,
        timestamp: Option<&str>,
        signature: Option<&str>,
        body: &[u8],
        now: i64,
    ) -> Result<Taken, Refusal> {
        if body.len() > MAX_BODY_BYTES {
            return Err(Refusal::TooLarge);
        }
        let spec = self.wakes.spec(connector).ok_or(Refusal::UnknownConnector)?;
        super::signature::verify(spec.secret.expose().as_bytes(), timestamp, signature, body, now, spec.max_skew_seconds)?;
        let named = notification::read(body)?;
        if named.iter().any(|(table, _)| !self.wakes.knows(connector, table)) {
            return Err(Refusal::UnknownTable);
        }
        let mut woken = Vec::new();
        let mut refused = None;
        for (table, ts) in named {
            match self.wakes.wake(connector, &table, ts) {
                Ok(()) => woken.push(table),
                Err(refusal) => refused = Some(refusal),
            }
        }
        match refused {
            // Every table named was over its rate: nothing was woken.
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
    use snow_core::time::Timestamp;

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

    #[test]
    fn a_signed_notification_wakes_its_table_and_anything_else_is_refused_and_counted() {
        let (endpoint, wakes, metrics) = endpoint();
        let registration = wakes.register("c", "incident", crate::push::wakes::tests::spec(100));
        let body = br#"{"table":"incident","sys_id":"a1","sys_updated_on":"2026-06-01 10:00:07"}"#;
        let (ts, sig) = signed(body, NOW);
        let take = |connector: &str, ts: &str, sig: &str, body: &[u8]| endpoint.take(connector, Some(ts), Some(sig), body, NOW);
        assert_eq!(take("c", &ts, &sig, body), Ok(Taken { woken: vec!["incident".into()] }));
        assert_eq!(registration.wake().take(), Some(Timestamp::parse("2026-06-01 10:00:07").unwrap()));
        assert_eq!(metrics.sum("snow_push_accepted_total", &[("connector", "c")]), 1.0);

        assert_eq!(take("c", &ts, "v1=00", body), Err(Refusal::Unsigned), "not a MAC");
        assert_eq!(take("c", &ts, &signed(b"other", NOW).1, body), Err(Refusal::BadSignature), "forged");
        let (old_ts, old_sig) = signed(body, NOW - 301);
        assert_eq!(take("c", &old_ts, &old_sig, body), Err(Refusal::Stale), "replayed");
        assert_eq!(take("nobody", &ts, &sig, body), Err(Refusal::UnknownConnector));
        let other = br#"{"table":"problem","sys_updated_on":"2026-06-01 10:00:07"}"#;
        let (ots, osig) = signed(other, NOW);
        assert_eq!(take("c", &ots, &osig, other), Err(Refusal::UnknownTable));
        let junk = b"table=incident";
        let (jts, jsig) = signed(junk, NOW);
        assert_eq!(take("c", &jts, &jsig, junk), Err(Refusal::Malformed));
        let huge = vec![b' '; MAX_BODY_BYTES + 1];
        assert_eq!(take("c", &ts, &sig, &huge), Err(Refusal::TooLarge));
        assert_eq!(registration.wake().take(), None, "no refusal woke anything");
        for (reason, count) in
            [("unsigned", 1.0), ("bad_signature", 1.0), ("stale", 1.0), ("unknown_table", 1.0), ("malformed", 1.0), ("too_large", 1.0)]
        {
            assert_eq!(refused(&metrics, "c", reason), count, "{reason}");
        }
        assert_eq!(refused(&metrics, "", "unknown_connector"), 1.0, "a made-up connector name is not a label");
        assert_eq!(metrics.sum("snow_push_refused_total", &[("connector", "nobody")]), 0.0);
    }

    #[test]
    fn a_flood_is_refused_past_the_rate_and_leaves_one_wake_up() {
        let (endpoint, wakes, metrics) = endpoint();
        let registration = wakes.register("c", "incident", crate::push::wakes::tests::spec(10));
        let body = br#"{"table":"incident","sys_updated_on":"2026-06-01 10:00:07"}"#;
        let (ts, sig) = signed(body, NOW);
        let accepted = (0..100).filter(|_| endpoint.take("c", Some(&ts), Some(&sig), body, NOW).is_ok()).count();
        assert!((10..=11).contains(&accepted), "the bucket's ten, perhaps one refilled: {accepted}");
        assert_eq!(refused(&metrics, "c", "rate_limited"), (100 - accepted) as f64);
        assert!(registration.wake().take().is_some());
        assert_eq!(registration.wake().take(), None, "one wake-up for the flood");
    }
}
