//! The per-instance cap on requests in flight, shared by every connector that targets the host.
//! Additive increase, multiplicative decrease: a 429 halves the current limit (never below 1),
//! and each run of `limit` answers that are not 429 or 5xx raises it by one, never above the
//! configured cap.
//!
//! When the cap is reached, requests wait in line **per connector** and a freed place goes to the
//! connectors in turn (round robin), first come first served within each: a connector with many
//! units (a source backfilling 25 tables, each with a 150 ms query outstanding) cannot starve one
//! with few (a sink whose lanes write in milliseconds); each connector that waits gets an equal
//! share of the places as they free up. Nobody arriving while others wait jumps the line.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

#[derive(Debug)]
struct State {
    limit: usize,
    in_flight: usize,
    successes: usize,
    /// Requests waiting for a place, by connector, oldest first. A sender hands its waiter a
    /// place already counted in `in_flight`.
    waiting: BTreeMap<String, VecDeque<oneshot::Sender<()>>>,
    /// The connector served last: the next place goes to the first waiting connector after it.
    served: Option<String>,
}

impl State {
    /// Hands free places to waiting requests, one connector after the other.
    fn dispatch(&mut self) {
        while self.in_flight < self.limit {
            let next = {
                let after = self.served.as_deref();
                let later =
                    after.and_then(|a| self.waiting.range::<str, _>((std::ops::Bound::Excluded(a), std::ops::Bound::Unbounded)).next());
                match later.or_else(|| self.waiting.iter().next()) {
                    Some((connector, _)) => connector.clone(),
                    None => return,
                }
            };
            let queue = self.waiting.get_mut(&next).expect("a connector with waiting requests");
            let waiter = queue.pop_front();
            if queue.is_empty() {
                self.waiting.remove(&next);
            }
            // A waiter that gave up (its request was dropped) takes nothing.
            if waiter.is_some_and(|w| w.send(()).is_ok()) {
                self.in_flight += 1;
                self.served = Some(next);
            }
        }
    }
}

/// Requests in flight to one instance host.
#[derive(Debug)]
pub struct InstanceLimiter {
    authority: String,
    cap: usize,
    state: Mutex<State>,
}

/// A place in flight; released when dropped.
#[derive(Debug)]
pub struct Permit {
    limiter: Arc<InstanceLimiter>,
    queued: bool,
}

impl Permit {
    /// Whether the request had to wait in line for its place.
    pub fn queued(&self) -> bool {
        self.queued
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.limiter.release();
    }
}

/// A request waiting in line; if it is dropped (its request abandoned) after a place was handed
/// to it, the place is given back.
struct InLine {
    limiter: Arc<InstanceLimiter>,
    place: Option<oneshot::Receiver<()>>,
}

impl Drop for InLine {
    fn drop(&mut self) {
        if let Some(mut place) = self.place.take() {
            place.close();
            if place.try_recv().is_ok() {
                self.limiter.release();
            }
        }
    }
}

impl InstanceLimiter {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn release(&self) {
        let mut state = self.lock();
        state.in_flight -= 1;
        state.dispatch();
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

    /// Requests waiting in line.
    pub fn waiting(&self) -> usize {
        self.lock().waiting.values().map(VecDeque::len).sum()
    }

    /// Waits for a place in flight for a request of `connector`: at once when there is one and
    /// nobody waits, otherwise in `connector`'s line.
    pub async fn acquire(self: &Arc<Self>, connector: &str) -> Permit {
        loop {
            let place = {
                let mut state = self.lock();
                if state.in_flight < state.limit && state.waiting.is_empty() {
                    state.in_flight += 1;
                    return Permit { limiter: self.clone(), queued: false };
                }
                let (give, place) = oneshot::channel();
                state.waiting.entry(connector.to_string()).or_default().push_back(give);
                place
            };
            let mut line = InLine { limiter: self.clone(), place: Some(place) };
            let granted = line.place.as_mut().expect("waiting for a place").await;
            line.place = None;
            // A sender is only dropped after sending (or with the limiter, which this holds).
            if granted.is_ok() {
                return Permit { limiter: self.clone(), queued: true };
            }
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
                state.dispatch();
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
                    state: Mutex::new(State { limit: cap, in_flight: 0, successes: 0, waiting: BTreeMap::new(), served: None }),
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
        let first = limiter.acquire("a").await;
        let waiting = tokio::spawn({
            let limiter = limiter.clone();
            async move { limiter.acquire("a").await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "the second request waits while the first is in flight");
        drop(first);
        let _second = waiting.await.unwrap();
    }

    /// Polls `future` once.
    async fn poll_once<F: std::future::Future + Unpin>(future: &mut F) -> std::task::Poll<F::Output> {
        std::future::poll_fn(|cx| std::task::Poll::Ready(std::pin::Pin::new(&mut *future).poll(cx))).await
    }

    #[tokio::test]
    async fn a_connector_with_many_requests_waiting_does_not_starve_one_with_few() {
        let limiter = LimiterRegistry::default().limiter("acme", 1);
        let held = limiter.acquire("source").await;
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        // Six requests of the source line up first, then two of the sink.
        for (i, connector) in ["source"; 6].into_iter().chain(["sink"; 2]).enumerate() {
            let (line, order) = (limiter.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                let permit = line.acquire(connector).await;
                assert!(permit.queued());
                order.lock().unwrap().push(connector);
            }));
            while limiter.waiting() < i + 1 {
                tokio::task::yield_now().await;
            }
        }
        drop(held);
        for t in tasks {
            t.await.unwrap();
        }
        let order = order.lock().unwrap().clone();
        assert_eq!(order.len(), 8);
        // In turn while both wait: the sink's two are among the first four places, not the last two.
        let sink_places: Vec<usize> = order.iter().enumerate().filter(|(_, c)| **c == "sink").map(|(i, _)| i).collect();
        assert!(sink_places.iter().all(|&i| i < 4), "{order:?}");
        assert_eq!(limiter.waiting(), 0);
    }

    #[tokio::test]
    async fn a_request_abandoned_after_its_place_was_handed_over_gives_it_back() {
        let limiter = LimiterRegistry::default().limiter("acme", 1);
        let held = limiter.acquire("a").await;
        let mut abandoned = Box::pin(limiter.acquire("b"));
        assert!(poll_once(&mut abandoned).await.is_pending(), "waits behind the first");
        assert_eq!(limiter.waiting(), 1);
        // The place goes to the waiting request, which is dropped before it runs again.
        drop(held);
        assert_eq!(limiter.waiting(), 0);
        drop(abandoned);
        let mut next = Box::pin(limiter.acquire("c"));
        match poll_once(&mut next).await {
            std::task::Poll::Ready(permit) => assert!(!permit.queued(), "the place was free again"),
            std::task::Poll::Pending => panic!("the abandoned request kept its place"),
        }
    }

    #[tokio::test]
    async fn after_a_429_waiting_requests_get_places_only_within_the_lowered_limit() {
        let limiter = LimiterRegistry::default().limiter("acme", 2);
        let first = limiter.acquire("a").await;
        let second = limiter.acquire("a").await;
        let mut waiting = Box::pin(limiter.acquire("a"));
        assert!(poll_once(&mut waiting).await.is_pending());
        // A 429 lowers the limit to one.
        limiter.record(429);
        drop(first);
        assert!(poll_once(&mut waiting).await.is_pending(), "two in flight was one too many: the limit is now 1");
        drop(second);
        let permit = poll_once(&mut waiting).await;
        assert!(matches!(&permit, std::task::Poll::Ready(p) if p.queued()), "the waiting request got the place");
        let mut late = Box::pin(limiter.acquire("b"));
        assert!(poll_once(&mut late).await.is_pending(), "the limit of one is taken");
    }
}
