//! The fleet's status, in `status.storage.topic`: each worker publishes the state of the units it
//! runs (`status-unit-["<connector>","<unit>"]`) and of the connectors it leads
//! (`status-connector-<name>`), with its worker id, so any worker answers `GET …/status` for the
//! whole fleet. States are Kafka Connect's (`RUNNING`, `PAUSED`, `STOPPED`, `FAILED` with its
//! `trace`, `UNASSIGNED`); `detail` and `message` keep snow-connect's finer state (retrying,
//! waiting for Kafka, and why). Messages are redacted by the board before they get here.

use std::sync::Arc;

use anyhow::Result;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use crate::state::StateTopic;
use crate::status::{BoardEvent, UnitState, UnitStatus};

/// A unit's or a connector's published status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Published {
    /// Kafka Connect's state.
    pub state: String,
    /// snow-connect's state (`running`, `retrying`, `waiting`, `parked`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Why (for a failed unit: the same as `trace`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The failure, for `FAILED`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
    /// The worker that published it.
    pub worker_id: String,
    /// When, in ms since the Unix epoch.
    pub since_ms: u64,
}

/// Connect's state for one of snow-connect's.
pub fn connect_state(state: UnitState) -> &'static str {
    match state {
        UnitState::Starting | UnitState::Running | UnitState::Retrying | UnitState::Waiting => "RUNNING",
        UnitState::Parked => "FAILED",
        UnitState::Stopped => "UNASSIGNED",
    }
}

/// The status topic, as one worker sees and writes it.
#[derive(Clone)]
pub struct StatusLog {
    topic: Arc<StateTopic>,
    worker_id: String,
}

fn unit_key(connector: &str, unit: &str) -> Vec<u8> {
    format!("status-unit-{}", serde_json::json!([connector, unit])).into_bytes()
}

fn connector_key(connector: &str) -> Vec<u8> {
    format!("status-connector-{connector}").into_bytes()
}

impl StatusLog {
    /// The log over `topic`, written as `worker_id`.
    pub fn new(topic: Arc<StateTopic>, worker_id: &str) -> Self {
        Self { topic, worker_id: worker_id.to_string() }
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

    /// Publishes a connector's own status.
    pub async fn publish_connector(&self, connector: &str, state: &str, trace: Option<&str>) -> Result<()> {
        let since_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0);
        let record = Published {
            state: state.to_string(),
            detail: None,
            message: trace.map(crate::redact::clean),
            trace: trace.map(crate::redact::clean),
            worker_id: self.worker_id.clone(),
            since_ms,
        };
        self.topic.write(&connector_key(connector), Some(&serde_json::to_vec(&record)?)).await
    }

    /// The connector's own status, if one was published.
    pub fn connector(&self, connector: &str) -> Option<Published> {
        self.topic.get(&connector_key(connector)).and_then(|v| serde_json::from_slice(&v).ok())
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
                Some((unit, serde_json::from_slice(&v).ok()?))
            })
            .collect()
    }

    /// Removes everything published for `connector` (it was deleted).
    pub async fn forget(&self, connector: &str) -> Result<()> {
        for (unit, _) in self.units(connector) {
            self.topic.write(&unit_key(connector, &unit), None).await?;
        }
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
            }
        }
    }
}
