//! The per-instance cap on requests in flight, shared by every connector that targets the host.
//! Additive increase, multiplicative decrease: a 429 halves the current limit (never below 1),
//! and each run of `limit` answers that are not 429 or 5xx raises it by one, never above the
//! configured cap.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

#[derive(Debug)]
struct State {
    limit: usize,
    in_flight: usize,
    successes: usize,
}

/// Requests in flight to one instance host.
#[derive(Debug)]
pub struct InstanceLimiter {
    authority: String,
    cap: usize,
    state: Mutex<State>,
    changed: Notify,
}

/// A place in flight; released when dropped.
#[derive(Debug)]
pub struct Permit {
    limiter: Arc<InstanceLimiter>,
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.limiter.lock().in_flight -= 1;
        self.limiter.changed.notify_waiters();
    }
}

impl InstanceLimiter {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The instance host this limiter guards.
    pub fn authority(&self) -> &str {
        &self.authority
    }

    /// The configured cap.
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// The current limit (between 1 and the cap).
    pub fn limit(&self) -> usize {
        self.lock().limit
    }

    /// Waits for a place in flight.
    pub async fn acquire(self: &Arc<Self>) -> Permit {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut state = self.lock();
                if state.in_flight < state.limit {
                    state.in_flight += 1;
                    return Permit { limiter: self.clone() };
                }
            }
            notified.await;
        }
    }

    /// Adjusts the limit to an answer's status.
    pub fn record(&self, status: u16) {
        let mut state = self.lock();
        if status == 429 {
            let lowered = (state.limit / 2).max(1);
            if lowered < state.limit {
                tracing::info!(instance = %self.authority, "rate limited (429): in-flight limit lowered from {} to {lowered}", state.limit);
                state.limit = lowered;
            }
            state.successes = 0;
        } else if status < 500 {
            state.successes += 1;
            if state.successes >= state.limit && state.limit < self.cap {
                state.limit += 1;
                state.successes = 0;
                tracing::debug!(instance = %self.authority, "in-flight limit raised to {}", state.limit);
                drop(state);
                self.changed.notify_waiters();
            }
        }
    }
}

/// One limiter per instance host for the whole process.
#[derive(Debug, Default)]
pub struct LimiterRegistry {
    limiters: Mutex<HashMap<String, Arc<InstanceLimiter>>>,
}

impl LimiterRegistry {
    /// The limiter of `authority`, created with `cap` on first use. A later connector asking for
    /// a different cap gets the existing limiter; the difference is logged.
    pub fn limiter(&self, authority: &str, cap: usize) -> Arc<InstanceLimiter> {
        let mut limiters = self.limiters.lock().unwrap_or_else(|e| e.into_inner());
        let limiter = limiters
            .entry(authority.to_string())
            .or_insert_with(|| {
                Arc::new(InstanceLimiter {
                    authority: authority.to_string(),
                    cap,
                    state: Mutex::new(State { limit: cap, in_flight: 0, successes: 0 }),
                    changed: Notify::new(),
                })
            })
            .clone();
        if limiter.cap != cap {
            tracing::warn!(
                instance = authority,
                "in-flight cap {cap} requested, but {} is already in force for this instance",
                limiter.cap
            );
        }
        limiter
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn halves_on_429_grows_back_and_never_exceeds_the_cap() {
        let limiter = LimiterRegistry::default().limiter("acme", 8);
        assert_eq!(limiter.limit(), 8);
        limiter.record(429);
        assert_eq!(limiter.limit(), 4);
        limiter.record(429);
        limiter.record(429);
        limiter.record(429);
        assert_eq!(limiter.limit(), 1, "never below one");
        for _ in 0..1 + 2 + 3 {
            limiter.record(200);
        }
        assert_eq!(limiter.limit(), 4, "one more after each run of `limit` successes");
        for _ in 0..1000 {
            limiter.record(200);
        }
        assert_eq!(limiter.limit(), 8, "never above the cap");
        limiter.record(503);
        assert_eq!(limiter.limit(), 8, "5xx neither raises nor lowers");
    }

    #[tokio::test]
    async fn waits_for_a_place_and_wakes_on_release() {
        let limiter = LimiterRegistry::default().limiter("acme", 1);
        let first = limiter.acquire().await;
        let waiting = tokio::spawn({
            let limiter = limiter.clone();
            async move { limiter.acquire().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "the second request waits while the first is in flight");
        drop(first);
        let _second = waiting.await.unwrap();
    }
}
