//! Where accepted notifications go: one [`Wake`] per running table (connector, table), which the
//! table's unit waits on between sweeps, registered while the unit runs ([`Registration`]).
//! Waking is idempotent: any number of notifications before the unit looks leave one wake-up and
//! the latest stamp, so a burst is one sweep; each table takes at most
//! `snow.push.max.per.second` notifications a second (a token bucket), the rest are refused
//! (429), never queued.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use snow_core::time::Timestamp;
use tokio::sync::Notify;

use super::Refusal;
use super::rate::Bucket;
use crate::config::push::PushSpec;

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

    /// Waits up to `timeout` for a wake-up; the stamp it carried, if one came. A permit left by a
    /// wake-up whose stamp was already taken does not end the wait.
    pub async fn wait(&self, timeout: Duration) -> Option<Timestamp> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(ts) = self.take() {
                return Some(ts);
            }
            tokio::time::timeout_at(deadline, self.notify.notified()).await.ok()?;
        }
    }

    /// The stamp of a wake-up that came and was not taken yet.
    pub fn take(&self) -> Option<Timestamp> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

/// A running table: `(connector, table)`.
type TableKey = (String, String);

/// A registered table: its wake-up, its rate and its connector's push settings.
#[derive(Debug)]
struct Entry {
    wake: Arc<Wake>,
    bucket: Bucket,
    spec: Arc<PushSpec>,
}

/// Every running table's wake-up, by connector and table (one per process).
#[derive(Debug, Default)]
pub struct Wakes {
    tables: Mutex<HashMap<TableKey, Entry>>,
}

/// A table's registration, held by its unit: dropping it forgets the table (notifications for
/// it are refused again), unless a newer unit of the same table registered since.
#[derive(Debug)]
pub struct Registration {
    wakes: Arc<Wakes>,
    key: TableKey,
    wake: Arc<Wake>,
}

impl Registration {
    /// The table's wake-up.
    pub fn wake(&self) -> &Arc<Wake> {
        &self.wake
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut tables = self.wakes.tables.lock().unwrap_or_else(|e| e.into_inner());
        if tables.get(&self.key).is_some_and(|e| Arc::ptr_eq(&e.wake, &self.wake)) {
            tables.remove(&self.key);
        }
    }
}

impl Wakes {
    /// Registers `connector`'s `table` with the connector's push settings (its unit opened); the
    /// table takes at most `spec.max_per_second` notifications a second.
    pub fn register(self: &Arc<Self>, connector: &str, table: &str, spec: Arc<PushSpec>) -> Registration {
        let key = (connector.to_string(), table.to_string());
        let wake = Arc::new(Wake::default());
        let bucket = Bucket::full(spec.max_per_second);
        let entry = Entry { wake: wake.clone(), bucket, spec };
        self.tables.lock().unwrap_or_else(|e| e.into_inner()).insert(key.clone(), entry);
        Registration { wakes: self.clone(), key, wake }
    }

    /// The push settings of `connector`, when one of its tables runs here.
    pub fn spec(&self, connector: &str) -> Option<Arc<PushSpec>> {
        let tables = self.tables.lock().unwrap_or_else(|e| e.into_inner());
        tables.iter().find(|((c, _), _)| c == connector).map(|(_, e)| e.spec.clone())
    }

    /// The tables of `connector` that run here.
    pub fn tables_of(&self, connector: &str) -> std::collections::BTreeSet<String> {
        let tables = self.tables.lock().unwrap_or_else(|e| e.into_inner());
        tables.keys().filter(|(c, _)| c == connector).map(|(_, t)| t.clone()).collect()
    }

    /// Wakes `connector`'s `table` with `ts` if it runs here, whatever its rate (a wake-up another
    /// worker accepted, [`crate::worker::push`]): whether it runs here.
    pub fn wake_running(&self, connector: &str, table: &str, ts: Timestamp) -> bool {
        let tables = self.tables.lock().unwrap_or_else(|e| e.into_inner());
        let Some(entry) = tables.get(&(connector.to_string(), table.to_string())) else { return false };
        entry.wake.wake(ts);
        true
    }

    /// Whether `connector`'s `table` runs here.
    pub fn knows(&self, connector: &str, table: &str) -> bool {
        self.tables.lock().unwrap_or_else(|e| e.into_inner()).contains_key(&(connector.to_string(), table.to_string()))
    }

    /// Wakes `connector`'s `table` with stamp `ts`, unless the table is not running here
    /// ([`Refusal::UnknownTable`]) or over its rate ([`Refusal::RateLimited`]).
    pub fn wake(&self, connector: &str, table: &str, ts: Timestamp) -> Result<(), Refusal> {
        let mut tables = self.tables.lock().unwrap_or_else(|e| e.into_inner());
        let entry = tables.get_mut(&(connector.to_string(), table.to_string())).ok_or(Refusal::UnknownTable)?;
        if !entry.bucket.allow(entry.spec.max_per_second) {
            return Err(Refusal::RateLimited);
        }
        entry.wake.wake(ts);
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn ts(s: i64) -> Timestamp {
        Timestamp(1_700_000_000 + s)
    }

    pub(crate) fn spec(max_per_second: u32) -> Arc<PushSpec> {
        Arc::new(PushSpec {
            secret: snow_core::auth::Secret::new("a-long-random-shared-secret"),
            listen: None,
            tls: None,
            max_skew_seconds: 300,
            max_per_second,
            min_interval: Duration::ZERO,
        })
    }

    #[tokio::test]
    async fn a_burst_is_one_wake_up_with_its_latest_stamp() {
        let wakes = Arc::new(Wakes::default());
        let registration = wakes.register("c", "incident", spec(100));
        let wake = registration.wake().clone();
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

    #[tokio::test]
    async fn a_wake_up_already_taken_does_not_end_the_next_wait() {
        let wakes = Arc::new(Wakes::default());
        let registration = wakes.register("c", "incident", spec(100));
        let wake = registration.wake().clone();
        // Taken between sweeps (the woken sweep's stamp): its permit must not end the next pause.
        wakes.wake("c", "incident", ts(1)).unwrap();
        assert_eq!(wake.take(), Some(ts(1)));
        let waiting = {
            let wake = wake.clone();
            tokio::spawn(async move { wake.wait(Duration::from_secs(30)).await })
        };
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(!waiting.is_finished(), "the pause goes on: nothing new came");
        wakes.wake("c", "incident", ts(2)).unwrap();
        assert_eq!(waiting.await.unwrap(), Some(ts(2)));
    }

    #[test]
    fn unknown_tables_and_bursts_over_the_rate_are_refused() {
        let wakes = Arc::new(Wakes::default());
        assert_eq!(wakes.wake("c", "incident", ts(1)), Err(Refusal::UnknownTable));
        let registration = wakes.register("c", "incident", spec(5));
        assert!(wakes.spec("c").is_some() && wakes.spec("d").is_none() && wakes.knows("c", "incident"));
        let accepted = (0..20).filter(|_| wakes.wake("c", "incident", ts(1)).is_ok()).count();
        assert_eq!(accepted, 5, "a full bucket, then refusals");
        assert_eq!(wakes.wake("c", "incident", ts(1)), Err(Refusal::RateLimited));
        assert_eq!(wakes.wake("c", "problem", ts(1)), Err(Refusal::UnknownTable), "per table");
        drop(registration);
        assert_eq!(wakes.wake("c", "incident", ts(1)), Err(Refusal::UnknownTable), "its unit stopped");
    }

    #[test]
    fn an_old_units_registration_does_not_forget_its_successor() {
        let wakes = Arc::new(Wakes::default());
        let old = wakes.register("c", "incident", spec(5));
        let new = wakes.register("c", "incident", spec(5));
        drop(old);
        assert!(wakes.knows("c", "incident"), "the new unit's registration stands");
        wakes.wake("c", "incident", ts(4)).unwrap();
        assert_eq!(new.wake().take(), Some(ts(4)), "and it is the one woken");
    }
}
