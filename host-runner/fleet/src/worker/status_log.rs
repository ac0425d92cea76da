//! The fleet's status, in `status.storage.topic`: each worker publishes the state of the units it
//! runs (`status-unit-["<connector>","<unit>"]`) and of the connectors it leads
//! (`status-connector-<name>`), with its worker id, so any worker answers `GET …/status` for the
//! whole fleet. States are Kafka Connect's (`RUNNING`, `PAUSED`, `STOPPED`, `FAILED` with its
//! `trace`, `UNASSIGNED`); `detail` and `message` keep snow-connect's finer state (retrying,
//! waiting for Kafka, and why). Messages are redacted by the board before they get here.
//!
//! Every worker also beats (`worker-<id>` → the time, every second, [`StatusLog::beat`]). A unit
//! or connector published `RUNNING` or `PAUSED` by a worker whose beat is older than
//! [`StatusLog::stale_after`] reads as `UNASSIGNED`, with why: a worker that died keeps its slots
//! until its group session expires, and its units are not running anywhere meanwhile. Beats are
//! compared with this worker's clock (the fleet's clocks are assumed in step, as NTP keeps them).

use std::sync::Arc;

use anyhow::Result;
use tokio::sync::mpsc;

pub use crate::herder::{Published, connect_state};
use snow_runtime::state::StateTopic;
use snow_runtime::status::{BoardEvent, UnitState, UnitStatus};

/// The status topic, as one worker sees and writes it.
#[derive(Clone)]
pub struct StatusLog {
    topic: Arc<StateTopic>,
    worker_id: String,
    stale_after: std::time::Duration,
}

/// How often a worker beats.
pub const BEAT: std::time::Duration = std::time::Duration::from_secs(1);

fn worker_key(worker: &str) -> Vec<u8> {
    format!("worker-{worker}").into_bytes()
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

fn unit_key(connector: &str, unit: &str) -> Vec<u8> {
    format!("status-unit-{}", serde_json::json!([connector, unit])).into_bytes()
}

/// Kafka Connect's key of an active topic (KIP-558).
fn topic_key(topic: &str, connector: &str) -> Vec<u8> {
    format!("topic-{topic}-{connector}").into_bytes()
}

fn connector_key(connector: &str) -> Vec<u8> {
    format!("status-connector-{connector}").into_bytes()
}

impl StatusLog {
    /// The log over `topic`, written as `worker_id`, in a fleet whose group session is `session`.
    pub fn new(topic: Arc<StateTopic>, worker_id: &str, session: std::time::Duration) -> Self {
        Self { topic, worker_id: worker_id.to_string(), stale_after: Self::stale_after(session) }
    }

    /// How long after its last beat a worker's units read as `UNASSIGNED`: three missed beats, or a
    /// third of the session, whichever is longer (a busy worker's beat may be late; a dead one is
    /// found well before its session expires).
    pub fn stale_after(session: std::time::Duration) -> std::time::Duration {
        (BEAT * 3).max(session / 3)
    }

    /// Says this worker is alive (every [`BEAT`]).
    pub async fn beat(&self) -> Result<()> {
        self.topic.write(&worker_key(&self.worker_id), Some(now_ms().to_string().as_bytes())).await
    }

    /// Says this worker is gone (a clean stop).
    pub async fn leave(&self) -> Result<()> {
        self.topic.write(&worker_key(&self.worker_id), None).await
    }

    /// Why `worker`'s statuses are not to be believed, if they are not: its last beat is too old.
    fn silent(&self, worker: &str) -> Option<String> {
        if worker == self.worker_id {
            return None;
        }
        let last = self.topic.get(&worker_key(worker)).and_then(|v| String::from_utf8(v).ok()).and_then(|v| v.parse::<u64>().ok());
        let age = last.map(|ms| now_ms().saturating_sub(ms));
        match age {
            Some(age) if age <= self.stale_after.as_millis() as u64 => None,
            Some(age) => Some(format!(
                "its worker {worker} has not been heard of for {:.1} s; it is reassigned when the worker's group session expires",
                age as f64 / 1000.0
            )),
            None => Some(format!("its worker {worker} is not in the fleet; it is reassigned when the worker's group session expires")),
        }
    }

    /// `published` as it is now: `UNASSIGNED` if its worker fell silent while it ran.
    fn believed(&self, mut published: Published) -> Published {
        if matches!(published.state.as_str(), "RUNNING" | "PAUSED")
            && let Some(why) = self.silent(&published.worker_id)
        {
            published.state = "UNASSIGNED".into();
            published.detail = Some("unassigned".into());
            published.message = Some(why);
            published.trace = None;
        }
        published
    }

    /// Publishes a unit's status as the board has it; `state` overrides Connect's state (`PAUSED`).
    pub async fn publish_unit(&self, status: &UnitStatus, state: Option<&str>) -> Result<()> {
        let connect = state.unwrap_or(connect_state(status.state));
        let record = Published {
            state: connect.to_string(),
            detail: Some(serde_json::to_value(status.state)?.as_str().unwrap_or_default().to_string()),
            message: status.message.clone(),
            trace: status.message.clone().filter(|_| connect == "FAILED"),
            worker_id: self.worker_id.clone(),
            since_ms: status.since_ms,
        };
        self.topic.write(&unit_key(&status.connector, &status.unit), Some(&serde_json::to_vec(&record)?)).await
    }

    /// Publishes a connector's own status; `trace` is text already made showable
    /// ([`snow_runtime::config::shown`]), scrubbed by value once more here.
    pub async fn publish_connector(&self, connector: &str, state: &str, trace: Option<&str>) -> Result<()> {
        let since_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0);
        let record = Published {
            state: state.to_string(),
            detail: None,
            message: trace.map(|t| snow_runtime::redact::scrub(t).into_owned()),
            trace: trace.map(|t| snow_runtime::redact::scrub(t).into_owned()),
            worker_id: self.worker_id.clone(),
            since_ms,
        };
        self.topic.write(&connector_key(connector), Some(&serde_json::to_vec(&record)?)).await
    }

    /// The connector's own status, if one was published.
    pub fn connector(&self, connector: &str) -> Option<Published> {
        self.topic.get(&connector_key(connector)).and_then(|v| serde_json::from_slice(&v).ok()).map(|p| self.believed(p))
    }

    /// Every unit status published for `connector`, by unit.
    pub fn units(&self, connector: &str) -> Vec<(String, Published)> {
        self.topic
            .entries()
            .into_iter()
            .filter_map(|(k, v)| {
                let key = String::from_utf8(k).ok()?;
                let (c, unit): (String, String) = serde_json::from_str(key.strip_prefix("status-unit-")?).ok()?;
                (c == connector).then_some(())?;
                Some((unit, self.believed(serde_json::from_slice(&v).ok()?)))
            })
            .collect()
    }

    /// Records that `connector`'s `unit` uses `topic`, as Kafka Connect's status topic does.
    pub async fn publish_topic(&self, connector: &str, unit: &str, topic: &str) -> Result<()> {
        let record = serde_json::json!({ "topic": { "name": topic, "connector": connector, "task": unit, "discoverTimestamp": now_ms() } });
        self.topic.write(&topic_key(topic, connector), Some(&serde_json::to_vec(&record)?)).await
    }

    /// The topics `connector` used, by name (KIP-558's active topics).
    pub fn topics(&self, connector: &str) -> Vec<String> {
        let mut topics: Vec<String> = self
            .topic
            .entries()
            .into_iter()
            .filter(|(k, _)| k.starts_with(b"topic-"))
            .filter_map(|(_, v)| serde_json::from_slice::<serde_json::Value>(&v).ok())
            .filter(|v| v["topic"]["connector"] == connector)
            .filter_map(|v| v["topic"]["name"].as_str().map(str::to_string))
            .collect();
        topics.sort();
        topics.dedup();
        topics
    }

    /// Forgets the topics `connector` used.
    pub async fn reset_topics(&self, connector: &str) -> Result<()> {
        for topic in self.topics(connector) {
            self.topic.write(&topic_key(&topic, connector), None).await?;
        }
        Ok(())
    }

    /// Removes everything published for `connector` (it was deleted).
    pub async fn forget(&self, connector: &str) -> Result<()> {
        for (unit, _) in self.units(connector) {
            self.topic.write(&unit_key(connector, &unit), None).await?;
        }
        self.reset_topics(connector).await?;
        self.topic.write(&connector_key(connector), None).await
    }

    /// Publishes the board's changes in order until the board is dropped; a change that cannot be
    /// written is logged and the next goes on (the board itself stays right on this worker).
    /// `paused` says which connectors are paused (their stopped units are published as `PAUSED`).
    pub async fn publish(self, mut events: mpsc::UnboundedReceiver<BoardEvent>, paused: impl Fn(&str) -> Option<&'static str>) {
        while let Some(event) = events.recv().await {
            match event {
                BoardEvent::Changed(status) => {
                    let state = if status.state == UnitState::Stopped { paused(&status.connector) } else { None };
                    if let Err(e) = self.publish_unit(&status, state).await {
                        tracing::warn!(connector = status.connector, unit = status.unit, "publishing a status: {e:#}");
                    }
                }
                BoardEvent::Flush(done) => {
                    let _ = done.send(());
                }
                BoardEvent::TopicUsed { connector, unit, topic } => {
                    if let Err(e) = self.publish_topic(&connector, &unit, &topic).await {
                        tracing::warn!(connector, unit, "publishing an active topic: {e:#}");
                    }
                }
            }
        }
    }
}
