//! Where accepted notifications go: one [`Wake`] per running table (connector, table), which the
//! table's unit waits on between sweeps. Waking is idempotent: any number of notifications
//! before the unit looks leave one wake-up and the latest stamp, so a burst is one sweep; each
//! table takes at most `max_per_second` notifications a second (a token bucket), the rest are
//! refused (429), never queued.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use snow_core::time::Timestamp;
use tokio::sync::Notify;

use super::Refusal;

/// The wake-up of one table's unit.
#[derive(Debug, Default)]
pub struct Wake {
    notify: Notify,
    /// The latest stamp notified and not yet taken.
    pending: Mutex<Option<Timestamp>>,
}

impl Wake {
    /// Records `ts` and wakes the unit (once, however many calls come before it looks).
    pub fn wake(&self, ts: Timestamp) {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        *pending = Some(pending.map_or(ts, |p| p.max(ts)));
        drop(pending);
        self.notify.notify_one();
    }

    /// Waits up to `timeout` for a wake-up; the stamp it carried, if one came.
    pub async fn wait(&self, timeout: Duration) -> Option<Timestamp> {
        if let Some(ts) = self.take() {
            return Some(ts);
        }
        match tokio::time::timeout(timeout, self.notify.notified()).await {
            Ok(()) => self.take(),
            Err(_) => None,
        }
    }

    /// The stamp of a wake-up that came and was not taken yet.
    pub fn take(&self) -> Option<Timestamp> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

/// A table's share of the notification rate.
#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// A running table: `(connector, table)`.
type TableKey = (String, String);

/// Every running table's wake-up, by connector and table.
#[derive(Debug)]
pub struct Wakes {
    max_per_second: f64,
    tables: Mutex<HashMap<TableKey, (Arc<Wake>, Bucket)>>,
}

impl Wakes {
    /// No table yet; each will take at most `max_per_second` notifications a second.
    pub fn new(max_per_second: u32) -> Self {
        Self { max_per_second: f64::from(max_per_second.max(1)), tables: Mutex::default() }
    }

    /// The wake-up of `connector`'s `table`, made on first use (a unit calls this when it opens).
    pub fn register(&self, connector: &str, table: &str) -> Arc<Wake> {
        let mut tables = self.tables.lock().unwrap_or_else(|e| e.into_inner());
        let entry = tables
            .entry((connector.to_string(), table.to_string()))
            .or_insert_with(|| (Arc::new(Wake::default()), Bucket { tokens: self.max_per_second, at: Instant::now() }));
        entry.0.clone()
    }

    /// Forgets `connector`'s `table` (its unit stopped): notifications for it are refused again.
    pub fn unregister(&self, connector: &str, table: &str) {
        self.tables.lock().unwrap_or_else(|e| e.into_inner()).remove(&(connector.to_string(), table.to_string()));
    }

    /// Wakes `connector`'s `table` with stamp `ts`, unless the table is not running here
    /// ([`Refusal::UnknownTable`]) or over its rate ([`Refusal::RateLimited`]).
    pub fn wake(&self, connector: &str, table: &str, ts: Timestamp) -> Result<(), Refusal> {
        let mut tables = self.tables.lock().unwrap_or_else(|e| e.into_inner());
        let (wake, bucket) = tables.get_mut(&(connector.to_string(), table.to_string())).ok_or(Refusal::UnknownTable)?;
        let now = Instant::now();
        bucket.tokens = (bucket.tokens + now.duration_since(bucket.at).as_secs_f64() * self.max_per_second).min(self.max_per_second);
        bucket.at = now;
        if bucket.tokens < 1.0 {
            return Err(Refusal::RateLimited);
        }
        bucket.tokens -= 1.0;
        wake.wake(ts);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: i64) -> Timestamp {
        Timestamp(1_700_000_000 + s)
    }

    #[tokio::test]
    async fn a_burst_is_one_wake_up_with_its_latest_stamp() {
        let wakes = Wakes::new(100);
        let wake = wakes.register("c", "incident");
        assert_eq!(wake.wait(Duration::from_millis(10)).await, None, "nothing came");
        for s in [3, 9, 5] {
            wakes.wake("c", "incident", ts(s)).unwrap();
        }
        assert_eq!(wake.wait(Duration::from_secs(5)).await, Some(ts(9)));
        assert_eq!(wake.wait(Duration::from_millis(10)).await, None, "one wake-up for the burst");
        let waiting = {
            let wake = wake.clone();
            tokio::spawn(async move { wake.wait(Duration::from_secs(30)).await })
        };
        tokio::task::yield_now().await;
        wakes.wake("c", "incident", ts(12)).unwrap();
        assert_eq!(waiting.await.unwrap(), Some(ts(12)), "a waiting unit wakes at once");
    }

    #[test]
    fn unknown_tables_and_bursts_over_the_rate_are_refused() {
        let wakes = Wakes::new(5);
        assert_eq!(wakes.wake("c", "incident", ts(1)), Err(Refusal::UnknownTable));
        wakes.register("c", "incident");
        let accepted = (0..20).filter(|_| wakes.wake("c", "incident", ts(1)).is_ok()).count();
        assert_eq!(accepted, 5, "a full bucket, then refusals");
        assert_eq!(wakes.wake("c", "incident", ts(1)), Err(Refusal::RateLimited));
        assert_eq!(wakes.wake("c", "problem", ts(1)), Err(Refusal::UnknownTable), "per table");
        wakes.unregister("c", "incident");
        assert_eq!(wakes.wake("c", "incident", ts(1)), Err(Refusal::UnknownTable));
    }
}
