//! The request budget of one instance (ADR 0034), shared by every connector of the process that
//! targets it: token buckets per hour and per minute (`snow.instance.requests.per.hour`,
//! `.per.minute`), shares by weight among the (connector, table) groups that wait, and a pause of
//! the whole instance after a 429 that said neither when to come back nor when the window resets.
//!
//! A bucket of `n` an hour refills at `n × 59/60` an hour and holds at most `n / 60`, so no hour
//! (any hour, not only a clock hour) counts more than `n` requests; the minute bucket likewise with
//! a burst of a sixtieth. Without either key there is no bucket, and only the pause applies.
//!
//! In a fleet every worker holds its own budget of each instance: a share of it, the configured
//! limits divided by the number of workers in the group ([`BudgetRegistry::set_workers`]), so the
//! fleet together never spends more than the instance allows.
//!
//! Waiting requests are grouped by (connector, table) and the next token goes to the group with
//! the least requests spent per unit of weight (weighted fair queueing): a table of weight 20 gets
//! twice the requests of one of weight 10 while both wait, and a group that was idle joins at the
//! others' level instead of spending the credit it saved. A waiter whose request was abandoned
//! takes nothing.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

/// A table's weight in the request budget when `snow.table.<t>.priority` is not set.
pub const DEFAULT_PRIORITY: u32 = 10;

/// The first pause after a 429 without `Retry-After` or `X-RateLimit-Reset`.
pub const FIRST_PAUSE: Duration = Duration::from_secs(10);
/// The longest pause: an hourly window has reset by then.
pub const MAX_PAUSE: Duration = Duration::from_secs(3600);

/// Requests a unit of time allows, refilled continuously.
#[derive(Debug, Clone)]
struct Bucket {
    window: Duration,
    capacity: f64,
    tokens: f64,
    per_second: f64,
    at: Instant,
}

impl Bucket {
    /// `n` requests per `window`: refilled at `n × 59/60` per window, holding `n / 60` (at least 1).
    fn new(n: u64, window: Duration, now: Instant) -> Self {
        let capacity = (n as f64 / 60.0).max(1.0);
        let per_second = n as f64 * 59.0 / 60.0 / window.as_secs_f64();
        Self { window, capacity, tokens: capacity, per_second, at: now }
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.per_second).min(self.capacity);
        self.at = now;
    }

    /// Time until a whole token is there.
    fn until_token(&self) -> Duration {
        if self.tokens >= 1.0 { Duration::ZERO } else { Duration::from_secs_f64((1.0 - self.tokens) / self.per_second) }
    }
}

/// Requests of one (connector, table) waiting for a token.
#[derive(Debug, Default)]
struct Group {
    weight: u32,
    /// Requests this group was given, divided by its weight (its place in the fair order).
    share: f64,
    waiting: VecDeque<oneshot::Sender<()>>,
    /// Requests spent since the start.
    spent: u64,
}

#[derive(Debug)]
struct State {
    /// The configured requests per hour and per minute.
    per_hour: Option<u64>,
    per_minute: Option<u64>,
    buckets: Vec<Bucket>,
    /// Workers sharing the budget (1 outside a fleet): the buckets hold the limits divided by it.
    workers: u32,
    groups: BTreeMap<(String, String), Group>,
    paused_until: Option<Instant>,
    /// When the current pause was set: a 429 to a request sent before it belongs to the same
    /// episode and does not lengthen it.
    paused_at: Option<Instant>,
    next_pause: Duration,
}

impl State {
    /// The buckets again for the limits and workers now, each keeping the tokens its window had
    /// saved up to its new burst.
    fn rebucket(&mut self) {
        let now = Instant::now();
        let mut fresh = buckets(self.per_hour, self.per_minute, self.workers, now);
        for new in &mut fresh {
            if let Some(old) = self.buckets.iter_mut().find(|b| b.window == new.window) {
                old.refill(now);
                new.tokens = old.tokens.min(new.capacity);
            }
        }
        self.buckets = fresh;
    }

    /// Hands tokens to waiting groups, in fair order, while there are tokens and no pause.
    fn dispatch(&mut self, now: Instant) {
        for b in &mut self.buckets {
            b.refill(now);
        }
        if self.paused_until.is_some_and(|until| until > now) {
            return;
        }
        self.paused_until = None;
        while self.buckets.iter().all(|b| b.tokens >= 1.0) {
            let next = self
                .groups
                .iter()
                .filter(|(_, g)| !g.waiting.is_empty())
                .min_by(|a, b| a.1.share.total_cmp(&b.1.share))
                .map(|(k, _)| k.clone());
            let Some(key) = next else { return };
            let group = self.groups.get_mut(&key).expect("a group with waiting requests");
            let waiter = group.waiting.pop_front().expect("a waiting request");
            if waiter.send(()).is_ok() {
                group.share += 1.0 / f64::from(group.weight.max(1));
                group.spent += 1;
                for b in &mut self.buckets {
                    b.tokens -= 1.0;
                }
            }
        }
    }

    /// How long until [`Self::dispatch`] can hand out the next token.
    fn until_next(&self, now: Instant) -> Duration {
        let paused = self.paused_until.map_or(Duration::ZERO, |until| until.saturating_duration_since(now));
        self.buckets.iter().map(Bucket::until_token).fold(paused, Duration::max)
    }

    /// The lowest share among groups that wait: where a group that starts waiting joins.
    fn level(&self) -> f64 {
        self.groups.values().filter(|g| !g.waiting.is_empty()).map(|g| g.share).fold(f64::INFINITY, f64::min)
    }
}

/// What the budget of one instance is.
#[derive(Debug)]
pub struct InstanceBudget {
    state: Mutex<State>,
    /// The process is stopping: nobody waits any more (a unit's last calls must end).
    stopping: AtomicBool,
}

/// What a group spent and waited, for the status and metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Spent {
    /// Requests given.
    pub requests: u64,
}

impl InstanceBudget {
    /// A budget of `per_hour` and `per_minute` requests (either may be absent: no bucket).
    pub fn new(per_hour: Option<u64>, per_minute: Option<u64>) -> Self {
        let buckets = buckets(per_hour, per_minute, 1, Instant::now());
        Self {
            state: Mutex::new(State {
                per_hour,
                per_minute,
                buckets,
                workers: 1,
                groups: BTreeMap::new(),
                paused_until: None,
                paused_at: None,
                next_pause: FIRST_PAUSE,
            }),
            stopping: AtomicBool::new(false),
        }
    }

    /// `workers` share the instance's budget (a fleet's members): this process spends at most
    /// its share, each limit divided by them (rounded up, at least one request a window). Tokens
    /// saved are kept up to the new burst.
    pub fn set_workers(&self, workers: u32) {
        let workers = workers.max(1);
        let mut state = self.lock();
        if state.workers == workers {
            return;
        }
        state.workers = workers;
        state.rebucket();
    }

    /// Changes the limits in place (every gate of the instance shares this one budget): tokens
    /// saved are kept up to the new burst.
    pub fn set_limits(&self, per_hour: Option<u64>, per_minute: Option<u64>) {
        let mut state = self.lock();
        if (state.per_hour, state.per_minute) == (per_hour, per_minute) {
            return;
        }
        state.per_hour = per_hour;
        state.per_minute = per_minute;
        state.rebucket();
    }

    /// The share of the limits this process spends: the workers sharing the budget.
    pub fn workers(&self) -> u32 {
        self.lock().workers
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The configured requests per hour and per minute.
    pub fn limits(&self) -> (Option<u64>, Option<u64>) {
        let state = self.lock();
        (state.per_hour, state.per_minute)
    }

    /// Waits for a token for a request of `table` of `connector` weighing `weight`; returns how
    /// long it waited. At once when tokens are there, nobody waits and the instance is not paused.
    pub async fn take(&self, connector: &str, table: &str, weight: u32) -> Duration {
        let started = Instant::now();
        let (give, mut given) = oneshot::channel();
        {
            let mut state = self.lock();
            let level = state.level();
            let group = state.groups.entry((connector.to_string(), table.to_string())).or_default();
            group.weight = weight.max(1);
            if group.waiting.is_empty() && level.is_finite() {
                // Joins at the level of those waiting: credit saved while idle is not spent now.
                group.share = group.share.max(level);
            }
            group.waiting.push_back(give);
            state.dispatch(started);
        }
        loop {
            if self.stopping.load(Ordering::SeqCst) {
                return started.elapsed();
            }
            let wait = {
                let mut state = self.lock();
                state.dispatch(Instant::now());
                state.until_next(Instant::now())
            };
            tokio::select! {
                _ = &mut given => return started.elapsed(),
                () = tokio::time::sleep(wait.clamp(Duration::from_millis(1), Duration::from_secs(1))) => {}
            }
        }
    }

    /// A 429 to a request sent at `sent` said neither when to come back nor when its window
    /// resets: every request to the instance waits for the pause (doubling with each episode,
    /// up to [`MAX_PAUSE`]), and the buckets are emptied (the instance counted more than this
    /// process did). The pause set; `None` when the 429 answered a request sent before the
    /// current pause was set (the requests in flight at once are one episode).
    pub fn rate_limited(&self, sent: Instant) -> Option<Duration> {
        let mut state = self.lock();
        // Stopping, the last requests go out whatever the instance said: no pause to set.
        if self.stopping.load(Ordering::SeqCst) || state.paused_at.is_some_and(|at| sent <= at) {
            return None;
        }
        let now = Instant::now();
        let pause = state.next_pause;
        state.paused_until = Some(now + pause);
        state.paused_at = Some(now);
        state.next_pause = (pause * 2).min(MAX_PAUSE);
        for b in &mut state.buckets {
            b.refill(now);
            b.tokens = 0.0;
        }
        Some(pause)
    }

    /// The process is stopping: every wait ends now, and none starts.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
    }

    /// Requests wait for the budget again (what [`Self::stop`] ended is over).
    pub fn resume(&self) {
        self.stopping.store(false, Ordering::SeqCst);
    }

    /// An answer that was not a 429: the next pause starts short again.
    pub fn answered(&self) {
        let mut state = self.lock();
        state.next_pause = FIRST_PAUSE;
    }

    /// Until when the instance is paused, if it is.
    pub fn paused_for(&self) -> Option<Duration> {
        let state = self.lock();
        state.paused_until.map(|until| until.saturating_duration_since(Instant::now())).filter(|d| !d.is_zero())
    }

    /// What `table` of `connector` spent.
    pub fn spent(&self, connector: &str, table: &str) -> Spent {
        let state = self.lock();
        Spent { requests: state.groups.get(&(connector.to_string(), table.to_string())).map_or(0, |g| g.spent) }
    }
}

/// The time a store's requests spent waiting for the budget, overlapping waits counted once: a
/// call into the guest is not timed out for it (`component.call.timeout.ms`).
#[derive(Debug, Default)]
pub struct Waits {
    /// Requests waiting now, since when the first of them waits, and the total of finished waits.
    state: Mutex<(usize, Option<std::time::Instant>, Duration)>,
}

/// A request waiting; its wait ends when dropped.
pub struct Waiting<'a>(&'a Waits);

impl Waits {
    /// A request starts waiting.
    pub fn enter(&self) -> Waiting<'_> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.0 == 0 {
            state.1 = Some(std::time::Instant::now());
        }
        state.0 += 1;
        Waiting(self)
    }

    /// The time spent with at least one request waiting.
    pub fn total(&self) -> Duration {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.2 + state.1.map_or(Duration::ZERO, |since| since.elapsed())
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut state = self.0.state.lock().unwrap_or_else(|e| e.into_inner());
        state.0 -= 1;
        if state.0 == 0
            && let Some(since) = state.1.take()
        {
            state.2 += since.elapsed();
        }
    }
}

/// The buckets of `per_hour` and `per_minute` requests shared by `workers`.
fn buckets(per_hour: Option<u64>, per_minute: Option<u64>, workers: u32, now: Instant) -> Vec<Bucket> {
    let share = |n: u64| n.div_ceil(u64::from(workers.max(1))).max(1);
    let mut out = Vec::new();
    if let Some(n) = per_hour {
        out.push(Bucket::new(share(n), Duration::from_secs(3600), now));
    }
    if let Some(n) = per_minute {
        out.push(Bucket::new(share(n), Duration::from_secs(60), now));
    }
    out
}

/// One budget per instance host for the whole process.
#[derive(Debug, Default)]
pub struct BudgetRegistry {
    budgets: Mutex<BTreeMap<String, Arc<InstanceBudget>>>,
    stopping: AtomicBool,
    /// Workers of the fleet sharing every budget (0: not set, a process of its own).
    workers: std::sync::atomic::AtomicU32,
}

impl BudgetRegistry {
    /// The budget of `authority`, made on first use with these limits. A later connector setting
    /// a smaller limit lowers it (the smallest any connector sets wins, logged); a larger one is
    /// logged and ignored.
    pub fn budget(&self, authority: &str, per_hour: Option<u64>, per_minute: Option<u64>) -> Arc<InstanceBudget> {
        let budget = self.budget_of(authority, per_hour, per_minute);
        if self.stopping.load(Ordering::SeqCst) {
            budget.stop();
        }
        budget.set_workers(self.workers.load(Ordering::SeqCst));
        budget
    }

    /// The fleet has `workers` members: every budget, and every later one, is this worker's share.
    pub fn set_workers(&self, workers: u32) {
        self.workers.store(workers, Ordering::SeqCst);
        for budget in self.budgets.lock().unwrap_or_else(|e| e.into_inner()).values() {
            budget.set_workers(workers);
        }
    }

    /// The process is stopping: no request waits for a budget any more.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        for budget in self.budgets.lock().unwrap_or_else(|e| e.into_inner()).values() {
            budget.stop();
        }
    }

    /// What was stopped is over (the Kafka Connect executor's previous task): budgets hold again,
    /// for the requests of what starts now.
    pub fn resume(&self) {
        self.stopping.store(false, Ordering::SeqCst);
        for budget in self.budgets.lock().unwrap_or_else(|e| e.into_inner()).values() {
            budget.resume();
        }
    }

    fn budget_of(&self, authority: &str, per_hour: Option<u64>, per_minute: Option<u64>) -> Arc<InstanceBudget> {
        let mut budgets = self.budgets.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(existing) = budgets.get(authority) {
            let smaller = |new: Option<u64>, old: Option<u64>| match (new, old) {
                (Some(n), Some(o)) => Some(n.min(o)),
                (n, o) => n.or(o),
            };
            let (per_hour_now, per_minute_now) = existing.limits();
            let wanted = (smaller(per_hour, per_hour_now), smaller(per_minute, per_minute_now));
            if wanted != (per_hour_now, per_minute_now) {
                tracing::info!(
                    instance = authority,
                    "request budget of the instance set to {:?} an hour, {:?} a minute (the smallest any connector sets)",
                    wanted.0,
                    wanted.1
                );
                // In place: every gate of the instance keeps sharing the one budget.
                existing.set_limits(wanted.0, wanted.1);
            }
            return existing.clone();
        }
        let budget = Arc::new(InstanceBudget::new(per_hour, per_minute));
        budgets.insert(authority.to_string(), budget.clone());
        budget
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_minute_budget_spreads_requests_and_no_minute_counts_more() {
        let budget = Arc::new(InstanceBudget::new(None, Some(120)));
        let mut given = Vec::new();
        let started = Instant::now();
        for _ in 0..10 {
            budget.take("c", "t", 10).await;
            given.push(started.elapsed());
        }
        // A burst of 2 (120/60), then one every 60/118 s.
        assert_eq!(given[1], Duration::ZERO, "the burst goes at once");
        assert!(given[9] >= Duration::from_secs_f64(8.0 * 60.0 / 118.0 - 0.01), "then at the refill rate: {given:?}");
        assert_eq!(budget.spent("c", "t").requests, 10);
    }

    #[tokio::test(start_paused = true)]
    async fn a_fleet_worker_spends_its_share_and_takes_the_whole_again_alone() {
        let registry = BudgetRegistry::default();
        registry.set_workers(4);
        let budget = registry.budget("acme.service-now.com", None, Some(480));
        assert_eq!(budget.workers(), 4, "a budget made after the fleet was counted takes its share");
        let count_in = |budget: Arc<InstanceBudget>, window: Duration| async move {
            let started = Instant::now();
            let mut n = 0u32;
            while started.elapsed() < window {
                budget.take("c", "t", 10).await;
                n += 1;
            }
            n
        };
        // 480 a minute over 4 workers: 120 a minute here (a burst of 2, then 118 a minute).
        let shared = count_in(budget.clone(), Duration::from_secs(60)).await;
        assert!((118..=122).contains(&shared), "{shared} requests in a minute");
        registry.set_workers(1);
        let alone = count_in(budget.clone(), Duration::from_secs(60)).await;
        assert!((470..=482).contains(&alone), "{alone} requests in a minute alone");
    }

    #[tokio::test(start_paused = true)]
    async fn waiting_tables_share_by_weight() {
        let budget = Arc::new(InstanceBudget::new(None, Some(60)));
        let counts = Arc::new(Mutex::new(BTreeMap::<&str, u32>::new()));
        let mut tasks = Vec::new();
        for (table, weight) in [("heavy", 30u32), ("light", 10u32)] {
            for _ in 0..4 {
                let (budget, counts) = (budget.clone(), counts.clone());
                tasks.push(tokio::spawn(async move {
                    loop {
                        budget.take("c", table, weight).await;
                        *counts.lock().unwrap().entry(table).or_default() += 1;
                    }
                }));
            }
        }
        tokio::time::sleep(Duration::from_secs(120)).await;
        for t in tasks {
            t.abort();
        }
        let counts = counts.lock().unwrap().clone();
        let (heavy, light) = (counts["heavy"], counts["light"]);
        assert!(heavy + light <= 2 * 59 + 2, "no more than the budget: {counts:?}");
        assert!((2.5..=3.5).contains(&(f64::from(heavy) / f64::from(light))), "weights 3:1 give 3:1: {counts:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_headerless_429_pauses_everyone_and_the_pause_doubles_until_an_answer() {
        let budget = Arc::new(InstanceBudget::new(None, None));
        assert_eq!(budget.take("c", "t", 10).await, Duration::ZERO, "no budget set: at once");
        let sent = Instant::now();
        assert_eq!(budget.rate_limited(sent), Some(FIRST_PAUSE));
        assert_eq!(budget.rate_limited(sent), None, "a 429 to another request in flight at the time: the same episode");
        let waited = budget.take("other", "u", 10).await;
        assert!(waited >= FIRST_PAUSE - Duration::from_millis(5), "every connector waits out the pause: {waited:?}");
        assert_eq!(budget.rate_limited(Instant::now()), Some(FIRST_PAUSE * 2), "again after the pause: twice as long");
        budget.answered();
        tokio::time::sleep(FIRST_PAUSE * 2).await;
        assert_eq!(budget.rate_limited(Instant::now()), Some(FIRST_PAUSE), "after an answer, short again");
        budget.stop();
        assert!(budget.take("c", "t", 10).await < Duration::from_millis(5), "stopping: nobody waits");
    }

    #[test]
    fn the_smallest_budget_any_connector_sets_wins() {
        let registry = BudgetRegistry::default();
        assert_eq!(registry.budget("acme", Some(500), None).limits(), (Some(500), None));
        assert_eq!(registry.budget("acme", Some(900), Some(20)).limits(), (Some(500), Some(20)));
        assert_eq!(registry.budget("acme", None, None).limits(), (Some(500), Some(20)));
        // Changed in place: a gate made before the change spends from the same budget, never
        // from a second one of the same instance.
        let first = registry.budget("acme", None, None);
        let lowered = registry.budget("acme", Some(100), None);
        assert!(Arc::ptr_eq(&first, &lowered));
        assert_eq!(first.limits(), (Some(100), Some(20)));
        // Stopped (a task ended) and resumed (the next one starts): the budget holds again, for
        // budgets made before and after.
        registry.stop();
        registry.resume();
        assert!(!first.stopping.load(Ordering::SeqCst) && !registry.budget("other", Some(5), None).stopping.load(Ordering::SeqCst));
    }
}
