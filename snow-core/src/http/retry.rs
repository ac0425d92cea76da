//! Retrying ServiceNow requests: what a failure means ([`classify`], one table), when to try again
//! ([`RetrySchedule`]: full-jitter exponential backoff, `Retry-After` honoured, bounded by attempts
//! and by elapsed time) and the headers that pace it ([`retry_after`]).
//!
//! Nothing here sleeps: the schedule says how long, and the caller sleeps with its own clock
//! (wasi clocks in a guest, tokio in the host, a manual clock in tests).

use std::time::Duration;

use super::transport::{Method, TransportErrorKind};
use crate::error::ErrorClass;
use crate::time::Timestamp;

/// The verdict on one failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// How it may be handled.
    pub class: ErrorClass,
    /// Why, in a few words.
    pub reason: &'static str,
}

/// One row of the status table: statuses `from..=to`, the class for idempotent requests, for
/// non-idempotent ones (POST), and the reason.
struct StatusRow(u16, u16, ErrorClass, ErrorClass, &'static str);

use ErrorClass::{Ambiguous as A, Fatal as F, Transient as T};

/// The classification of error statuses. First matching row wins.
const STATUS_TABLE: &[StatusRow] = &[
    // The instance queues requests of one session; past about ten it answers 202 and may drop
    // the request (servicenow-facts.md): the host never shares a session between writers, but a
    // 202 to a write that expects 200/201 stays unknown.
    StatusRow(202, 202, T, A, "accepted, not answered: the session's queue was full; a write may or may not be applied"),
    StatusRow(400, 400, F, F, "bad request: the query or body is invalid"),
    StatusRow(401, 401, F, F, "login refused (a token is retried once with a fresh one by the host)"),
    StatusRow(403, 403, F, F, "forbidden by an ACL or a business rule"),
    StatusRow(404, 404, F, F, "no such record, or hidden by an ACL"),
    StatusRow(405, 405, F, F, "method not allowed on this resource"),
    StatusRow(408, 408, T, T, "request timeout: the server did not process the request"),
    StatusRow(409, 409, F, F, "conflict with the record's current state"),
    StatusRow(413, 413, F, F, "request too large"),
    StatusRow(415, 415, F, F, "unsupported content type"),
    StatusRow(422, 422, F, F, "unprocessable: a field value was refused"),
    StatusRow(429, 429, T, T, "rate limited: not processed; wait for Retry-After"),
    StatusRow(400, 499, F, F, "client error"),
    StatusRow(500, 500, T, A, "internal error: a write may have been applied"),
    StatusRow(502, 502, T, A, "bad gateway: a write may have reached the instance"),
    StatusRow(503, 503, T, T, "unavailable: the instance refused the request before processing it"),
    StatusRow(504, 504, T, A, "gateway timeout: a write may have been applied"),
    StatusRow(500, 599, T, A, "server error: a write may have been applied"),
];

/// The classification of an error status answered to a request of `method`.
pub fn classify_status(status: u16, method: Method) -> Verdict {
    STATUS_TABLE
        .iter()
        .find(|r| (r.0..=r.1).contains(&status))
        .map(|r| Verdict { class: if method.is_idempotent() { r.2 } else { r.3 }, reason: r.4 })
        .unwrap_or(Verdict { class: F, reason: "unexpected status" })
}

/// The classification of a transport failure of a request of `method`.
pub fn classify_transport(kind: TransportErrorKind, method: Method) -> Verdict {
    let (idempotent, other, reason) = match kind {
        TransportErrorKind::Denied => (F, F, "refused by the host's outbound gate"),
        TransportErrorKind::Connect => (T, T, "no connection: nothing was sent"),
        TransportErrorKind::AfterSend => (T, A, "no complete answer after sending: a write may have been applied"),
        TransportErrorKind::TooLarge => (F, F, "answer larger than allowed"),
        TransportErrorKind::Invalid => (F, F, "request could not be built"),
    };
    Verdict { class: if method.is_idempotent() { idempotent } else { other }, reason }
}

/// The delay a `Retry-After` value asks for: delta-seconds, or an HTTP date read against the
/// server clock of the same answer (`server_now`, its `Date` header).
pub fn retry_after(value: &str, server_now: Option<Timestamp>) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = Timestamp::parse_http_date(value).ok()?;
    let now = server_now?;
    Some(Duration::from_secs(u64::try_from(at.0 - now.0).unwrap_or(0)))
}

/// ServiceNow's rate-limit headers (`X-RateLimit-*`), when an answer carries them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RateLimit {
    /// `X-RateLimit-Limit`: requests allowed per hour by the rule.
    pub limit: Option<u64>,
    /// `X-RateLimit-Remaining`, when sent.
    pub remaining: Option<u64>,
    /// `X-RateLimit-Reset`: when the window resets (epoch seconds).
    pub reset: Option<i64>,
    /// `X-RateLimit-Rule`: the sys_id of the rule that applies.
    pub rule: Option<String>,
}

impl RateLimit {
    /// Reads the headers with `header` (a case-insensitive lookup); `None` without any of them.
    pub fn from_headers<'a>(header: impl Fn(&str) -> Option<&'a str>) -> Option<Self> {
        let limit = RateLimit {
            limit: header("x-ratelimit-limit").and_then(|v| v.trim().parse().ok()),
            remaining: header("x-ratelimit-remaining").and_then(|v| v.trim().parse().ok()),
            reset: header("x-ratelimit-reset").and_then(|v| v.trim().parse().ok()),
            rule: header("x-ratelimit-rule").map(|v| v.trim().to_string()),
        };
        (limit != RateLimit::default()).then_some(limit)
    }
}

/// Bounds and pacing of retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (`snow.retry.max.attempts`).
    pub max_attempts: u32,
    /// Longest time from the first attempt to the start of the last (`snow.retry.max.elapsed.ms`).
    pub max_elapsed: Duration,
    /// First backoff ceiling (`snow.retry.backoff.initial.ms`).
    pub initial: Duration,
    /// Largest backoff ceiling (`snow.retry.backoff.max.ms`).
    pub max_backoff: Duration,
}

/// Which bound ended the retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// `max_attempts` attempts were made.
    Attempts(u32),
    /// The next attempt would start after `max_elapsed`.
    Elapsed(Duration),
}

impl Bound {
    /// "after 5 attempts (snow.retry.max.attempts)" and the like.
    pub fn describe(&self) -> String {
        match self {
            Bound::Attempts(n) => format!("gave up after {n} attempts (snow.retry.max.attempts)"),
            Bound::Elapsed(d) => format!("gave up after {} ms of retrying (snow.retry.max.elapsed.ms)", d.as_millis()),
        }
    }
}

/// The retry state of one logical request.
#[derive(Debug, Clone)]
pub struct RetrySchedule {
    policy: RetryPolicy,
    started: Duration,
    attempts: u32,
    seed: u64,
}

impl RetrySchedule {
    /// A schedule whose first attempt starts at monotonic time `now`; `seed` spreads the jitter.
    pub fn new(policy: RetryPolicy, now: Duration, seed: u64) -> Self {
        Self { policy, started: now, attempts: 1, seed: seed | 1 }
    }

    /// Attempts made so far.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// After a retryable failure at `now`: the delay before the next attempt, or the bound that
    /// ends the retries. `retry_after` (from the answer) replaces the jittered backoff.
    pub fn next_delay(&mut self, now: Duration, retry_after: Option<Duration>) -> Result<Duration, Bound> {
        if self.attempts >= self.policy.max_attempts {
            return Err(Bound::Attempts(self.attempts));
        }
        let delay = retry_after.unwrap_or_else(|| self.jittered());
        let elapsed = now.saturating_sub(self.started);
        // Retry-After is the server's number: added without overflow.
        if elapsed.saturating_add(delay) > self.policy.max_elapsed {
            return Err(Bound::Elapsed(elapsed));
        }
        self.attempts += 1;
        Ok(delay)
    }

    /// Full jitter: uniform in `[0, min(max_backoff, initial · 2^(attempts-1))]`.
    fn jittered(&mut self) -> Duration {
        let ceiling = self.policy.initial.saturating_mul(1u32 << (self.attempts - 1).min(24)).min(self.policy.max_backoff);
        // xorshift64*: spread, not secrecy.
        self.seed ^= self.seed >> 12;
        self.seed ^= self.seed << 25;
        self.seed ^= self.seed >> 27;
        let fraction = (self.seed.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64;
        ceiling.mul_f64(fraction)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retry_after_past_any_clock_ends_the_retries_instead_of_overflowing() {
        let policy =
            RetryPolicy { max_attempts: 5, max_elapsed: Duration::from_secs(60), initial: Duration::ZERO, max_backoff: Duration::ZERO };
        let mut schedule = RetrySchedule::new(policy, Duration::from_secs(5), 1);
        assert!(schedule.next_delay(Duration::from_secs(6), Some(Duration::from_secs(u64::MAX))).is_err());
    }

    #[test]
    fn every_row_of_the_status_table() {
        let expect = |status: u16, idempotent: ErrorClass, post: ErrorClass| {
            assert_eq!(classify_status(status, Method::Get).class, idempotent, "GET {status}");
            assert_eq!(classify_status(status, Method::Patch).class, idempotent, "PATCH {status}");
            assert_eq!(classify_status(status, Method::Post).class, post, "POST {status}");
        };
        for s in [400, 401, 403, 404, 405, 409, 413, 415, 422, 418, 499] {
            expect(s, F, F);
        }
        expect(202, T, A);
        expect(408, T, T);
        expect(429, T, T);
        expect(503, T, T);
        for s in [500, 502, 504, 507, 599] {
            expect(s, T, A);
        }
        // Each row has its own reason; the first match wins.
        assert!(classify_status(429, Method::Get).reason.contains("Retry-After"));
        assert_eq!(classify_status(418, Method::Get).reason, "client error");
        assert_eq!(classify_status(302, Method::Get).class, F);
        assert_eq!(STATUS_TABLE.len(), 18);
    }

    #[test]
    fn every_row_of_the_transport_table() {
        use TransportErrorKind::*;
        for (kind, get, post) in [(Denied, F, F), (Connect, T, T), (AfterSend, T, A), (TooLarge, F, F), (Invalid, F, F)] {
            assert_eq!(classify_transport(kind, Method::Get).class, get, "{kind:?}");
            assert_eq!(classify_transport(kind, Method::Delete).class, get, "{kind:?}");
            assert_eq!(classify_transport(kind, Method::Post).class, post, "{kind:?}");
        }
    }

    #[test]
    fn retry_after_in_both_forms() {
        assert_eq!(retry_after("7", None), Some(Duration::from_secs(7)));
        assert_eq!(retry_after(" 0 ", None), Some(Duration::ZERO));
        let now = Timestamp::parse("2024-01-01 00:00:00").ok();
        assert_eq!(retry_after("Mon, 01 Jan 2024 00:00:30 GMT", now), Some(Duration::from_secs(30)));
        assert_eq!(retry_after("Sun, 31 Dec 2023 23:59:00 GMT", now), Some(Duration::ZERO), "a date in the past means now");
        assert_eq!(retry_after("Mon, 01 Jan 2024 00:00:30 GMT", None), None, "a date needs the server clock");
        assert_eq!(retry_after("soon", now), None);
    }

    #[test]
    fn rate_limit_headers() {
        let headers = [("X-RateLimit-Limit", "5000"), ("X-RateLimit-Reset", "1704067200"), ("X-RateLimit-Rule", "abc")];
        let get = |name: &str| headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| *v);
        assert_eq!(
            RateLimit::from_headers(get),
            Some(RateLimit { limit: Some(5000), remaining: None, reset: Some(1_704_067_200), rule: Some("abc".into()) })
        );
        assert_eq!(RateLimit::from_headers(|_| None), None);
    }

    fn policy(max_attempts: u32, max_elapsed_s: u64) -> RetryPolicy {
        RetryPolicy {
            max_attempts,
            max_elapsed: Duration::from_secs(max_elapsed_s),
            initial: Duration::from_millis(100),
            max_backoff: Duration::from_secs(2),
        }
    }

    #[test]
    fn backoff_stays_within_its_growing_ceiling() {
        for seed in [1, 42, 0xdead_beef, u64::MAX] {
            let mut s = RetrySchedule::new(policy(30, 3600), Duration::ZERO, seed);
            let mut delays = Vec::new();
            for attempt in 1..30u32 {
                let d = s.next_delay(Duration::ZERO, None).unwrap();
                let ceiling = Duration::from_millis(100).saturating_mul(1 << (attempt - 1).min(24)).min(Duration::from_secs(2));
                assert!(d <= ceiling, "attempt {attempt}: {d:?} > {ceiling:?}");
                delays.push(d);
            }
            assert!(delays.iter().any(|d| *d > Duration::from_millis(500)), "the ceiling grows: {delays:?}");
            assert!(delays.windows(2).any(|w| w[0] != w[1]), "delays are jittered");
        }
    }

    #[test]
    fn bounded_by_attempts_and_by_elapsed_time() {
        let mut s = RetrySchedule::new(policy(3, 3600), Duration::ZERO, 7);
        assert!(s.next_delay(Duration::ZERO, None).is_ok());
        assert!(s.next_delay(Duration::ZERO, None).is_ok());
        let bound = s.next_delay(Duration::ZERO, None).unwrap_err();
        assert_eq!(bound, Bound::Attempts(3));
        assert_eq!(bound.describe(), "gave up after 3 attempts (snow.retry.max.attempts)");

        let mut s = RetrySchedule::new(policy(100, 10), Duration::from_secs(5), 7);
        assert_eq!(
            s.next_delay(Duration::from_secs(6), Some(Duration::from_secs(3))),
            Ok(Duration::from_secs(3)),
            "Retry-After replaces the backoff"
        );
        let bound = s.next_delay(Duration::from_secs(12), Some(Duration::from_secs(4))).unwrap_err();
        assert_eq!(bound, Bound::Elapsed(Duration::from_secs(7)));
        assert_eq!(bound.describe(), "gave up after 7000 ms of retrying (snow.retry.max.elapsed.ms)");
    }
}
