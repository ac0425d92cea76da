//! A fleet's push notifications (ADR 0032): any worker's REST listener takes
//! `POST /snow/push/<connector>` ([`snow_runtime::push::endpoint`]) and the table's owner is woken through
//! the fleet's wake topic (`push.storage.topic`, default `<group.id>-push`: compacted, keyed by
//! connector and table, each record the latest accepted stamp with who accepted it and when).
//! Every worker follows the topic and wakes the tables it runs whose record changed; the worker
//! that accepted a notification for a table it runs itself wakes it at once as well.
//!
//! The accepting worker checks the notification with the connector's settings as this worker
//! would run it ([`super::connectors::fleet_spec`], cached per configuration), and holds each
//! table to `snow.push.max.per.second` (per worker: a fleet of N takes at most N times that).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use snow_core::time::Timestamp;

use super::Fleet;
use snow_runtime::push::Refusal;
use snow_runtime::push::endpoint::{Door, Pending, Reception};
use snow_runtime::push::rate::Bucket;
use snow_runtime::shutdown::Shutdown;
use snow_runtime::state::StateTopic;

/// A wake-up on the topic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct WakeRecord {
    /// The notified `sys_updated_on`.
    stamp: String,
    /// The accepting worker.
    worker: String,
    /// When it accepted it (Unix ms): two wake-ups with one stamp are two records.
    at_ms: i64,
}

/// A connector's door as last built, with the properties it was built from.
type Cached = (BTreeMap<String, String>, Option<Door>);

/// The fleet's side of push: its wake topic, the doors of the connectors and the rates.
pub struct FleetPush {
    topic: Arc<StateTopic>,
    doors: Mutex<HashMap<String, Cached>>,
    rates: Mutex<HashMap<(String, String), Bucket>>,
    /// Each record of the topic as this worker last saw it (or wrote it: a wake-up this worker
    /// delivered itself is not delivered again when its record comes back).
    seen: Arc<Mutex<HashMap<Vec<u8>, Vec<u8>>>>,
}

/// The fleet's reception: checks against its configuration, delivers through its wake topic.
/// (Weak: the fleet holds the endpoint that holds this.)
pub struct FleetReception(pub std::sync::Weak<Fleet>);

impl FleetPush {
    /// Push over the fleet's wake `topic` (opened with the other state topics).
    pub fn new(topic: Arc<StateTopic>) -> Self {
        let seen = Arc::new(Mutex::new(topic.entries().into_iter().collect()));
        Self { topic, doors: Mutex::default(), rates: Mutex::default(), seen }
    }

    /// Follows the wake topic until `shutdown`, waking the tables that run here whose record
    /// changed after this worker started reading it.
    pub fn follow(&self, wakes: Arc<snow_runtime::push::wakes::Wakes>, mut shutdown: Shutdown) {
        let (topic, seen) = (self.topic.clone(), self.seen.clone());
        tokio::spawn(async move {
            let mut changes = topic.changes();
            loop {
                tokio::select! {
                    changed = changes.changed() => if changed.is_err() { break },
                    () = shutdown.wait() => break,
                }
                for (key, value) in topic.entries() {
                    if seen.lock().unwrap_or_else(|e| e.into_inner()).insert(key.clone(), value.clone()).as_ref() == Some(&value) {
                        continue;
                    }
                    let (Ok((connector, table)), Ok(record)) =
                        (serde_json::from_slice::<(String, String)>(&key), serde_json::from_slice::<WakeRecord>(&value))
                    else {
                        continue;
                    };
                    if let Ok(stamp) = Timestamp::parse(&record.stamp) {
                        wakes.wake_running(&connector, &table, stamp);
                    }
                }
            }
        });
    }
}

impl Reception for FleetReception {
    fn door<'a>(&'a self, connector: &'a str) -> Pending<'a, Option<Door>> {
        Box::pin(async move {
            let fleet = self.0.upgrade()?;
            let properties = fleet.configs.connector(connector)?.properties;
            let push = &fleet.push;
            if let Some((built_from, door)) = push.doors.lock().unwrap_or_else(|e| e.into_inner()).get(connector)
                && *built_from == properties
            {
                return door.clone();
            }
            let door = match super::connectors::fleet_spec(&fleet, connector, &properties).await {
                Ok(spec) => spec.push.clone().map(|push| Door {
                    spec: push,
                    tables: spec
                        .guest_config
                        .get("snow.tables")
                        .map(|t| t.split(',').map(|t| t.trim().to_string()).collect())
                        .unwrap_or_default(),
                }),
                // Not cached: what failed (a component not fetched yet) may pass next time.
                Err(e) => {
                    tracing::debug!(connector, "no push door: {e:#}");
                    return None;
                }
            };
            push.doors.lock().unwrap_or_else(|e| e.into_inner()).insert(connector.to_string(), (properties, door.clone()));
            door
        })
    }

    fn deliver<'a>(&'a self, connector: &'a str, door: &'a Door, table: &'a str, ts: Timestamp) -> Pending<'a, Result<(), Refusal>> {
        Box::pin(async move {
            let fleet = self.0.upgrade().ok_or(Refusal::Unavailable)?;
            {
                let mut rates = fleet.push.rates.lock().unwrap_or_else(|e| e.into_inner());
                let bucket =
                    rates.entry((connector.to_string(), table.to_string())).or_insert_with(|| Bucket::full(door.spec.max_per_second));
                if !bucket.allow(door.spec.max_per_second) {
                    return Err(Refusal::RateLimited);
                }
            }
            // Here at once when the table runs here; through the topic for wherever it runs.
            fleet.runner.wakes().wake_running(connector, table, ts);
            let key = serde_json::to_vec(&(connector, table)).unwrap_or_default();
            let record = WakeRecord { stamp: ts.to_string(), worker: fleet.config.worker_id.clone(), at_ms: unix_ms() };
            let value = serde_json::to_vec(&record).unwrap_or_default();
            fleet.push.seen.lock().unwrap_or_else(|e| e.into_inner()).insert(key.clone(), value.clone());
            fleet.push.topic.write(&key, Some(&value)).await.map_err(|e| {
                tracing::warn!(connector, table, "a push wake-up could not be written to the fleet's wake topic: {e:#}");
                Refusal::Unavailable
            })
        })
    }
}

fn unix_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}
