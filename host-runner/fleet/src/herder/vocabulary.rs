//! The vocabulary the REST API and the fleet share, below both: a connector as the configuration
//! topic stores it (its properties, target state and the latest restart asked for) and a unit's
//! published status. What
//! reads or writes them lives elsewhere (the fleet in [`crate::worker`], the API in
//! [`crate::rest`]); this module imports none of them, so the arrows between them point one way.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use snow_runtime::status::UnitState;

/// What a connector should be doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum TargetState {
    /// Running.
    Started,
    /// Its units stopped, kept assigned; resumes where it stopped.
    Paused,
    /// Its units stopped and released: the state in which its offsets may be changed (KIP-875).
    Stopped,
}

/// A restart asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestartRequest {
    /// Distinguishes one request from the next (the time it was made, in µs).
    pub id: u64,
    /// Restart the units too, not only the connector.
    pub include_tasks: bool,
    /// Only what is failed.
    pub only_failed: bool,
    /// One task (unit) only: `POST …/tasks/{id}/restart`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
}

/// One connector as the configuration topic holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectorRecord {
    /// Its properties, as written (secrets as references).
    pub properties: BTreeMap<String, String>,
    /// What it should be doing.
    pub target: TargetState,
    /// The latest restart asked for.
    pub restart: Option<RestartRequest>,
}

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
