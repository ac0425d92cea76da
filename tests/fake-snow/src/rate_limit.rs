//! A REST API rate limit rule as an instance applies it: at most `requests` API calls per fixed
//! window of `window_ms` (the window starts with the first call), answered 429 past it — with
//! `Retry-After`/`X-RateLimit-*` headers, or, as some instances do, without any
//! (`headers: false`). Set with `POST /__fake/settings {"rate_limit":{...}}` or
//! [`crate::Shared::set_rate_limit`]; `null` removes it.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// The rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RateLimit {
    /// API calls a window allows.
    pub requests: u64,
    /// The window's length in milliseconds (an hour on an instance; scaled down in tests).
    pub window_ms: u64,
    /// Whether a 429 carries `Retry-After` and `X-RateLimit-Reset`.
    #[serde(default)]
    pub headers: bool,
}

/// The rule and its current window.
#[derive(Debug)]
pub struct Limiter {
    rule: RateLimit,
    window_start: Option<Instant>,
    used: u64,
}

impl Limiter {
    /// A limiter applying `rule`.
    pub fn new(rule: RateLimit) -> Self {
        Self { rule, window_start: None, used: 0 }
    }

    /// The rule.
    pub fn rule(&self) -> RateLimit {
        self.rule
    }

    /// Counts a call; `Some(seconds until the window resets)` when it is refused.
    pub fn check(&mut self, now: Instant) -> Option<u64> {
        let window = Duration::from_millis(self.rule.window_ms.max(1));
        let start = *self.window_start.get_or_insert(now);
        if now.duration_since(start) >= window {
            self.window_start = Some(now);
            self.used = 0;
        }
        if self.used >= self.rule.requests {
            let start = self.window_start.unwrap_or(now);
            return Some((window.saturating_sub(now.duration_since(start))).as_secs().max(1));
        }
        self.used += 1;
        None
    }
}
