//! What every unit of every connector is doing now, for operators: starting, running, retrying
//! (and why), parked (and why: it stays stopped until the operator acts) or stopped. The units
//! write it as they change state; the status endpoint ([`crate::admin`]) and the summary printed
//! on exit read it. Messages are redacted like every other text the host shows.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

/// A unit's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum UnitState {
    /// Opening its guest instance.
    Starting,
    /// Polling (source) or consuming (sink) normally.
    Running,
    /// A transient failure; the unit retries after a pause.
    Retrying,
    /// Blocked on something outside it (Kafka has not acknowledged its records); the message says
    /// what. It goes on by itself when that comes back.
    Waiting,
    /// A failure that retrying cannot fix; the unit does nothing until restarted.
    Parked,
    /// Stopped on shutdown.
    Stopped,
}

/// One unit's status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnitStatus {
    /// The connector's name.
    pub connector: String,
    /// The unit (a source table, or `consumer` for a sink).
    pub unit: String,
    /// What it is doing.
    pub state: UnitState,
    /// Why, for `retrying` and `parked`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When it entered this state, in ms since the Unix epoch.
    pub since_ms: u64,
}

/// The process's status board; clones share it.
#[derive(Debug, Clone, Default)]
pub struct StatusBoard {
    units: Arc<Mutex<BTreeMap<(String, String), UnitStatus>>>,
    /// The topics each connector used, Kafka Connect's active topics (KIP-558).
    topics: Arc<Mutex<std::collections::BTreeSet<(String, String)>>>,
    /// Told of every change, in order (a worker publishes them to its fleet's status topic).
    listener: Arc<Mutex<Option<tokio::sync::mpsc::UnboundedSender<BoardEvent>>>>,
}

/// What the board tells its listener.
#[derive(Debug)]
pub enum BoardEvent {
    /// A unit changed state.
    Changed(UnitStatus),
    /// Answer once every change before this one is handled.
    Flush(tokio::sync::oneshot::Sender<()>),
    /// A unit of a connector used a topic (produced to it, or consumes it).
    TopicUsed {
        /// The connector.
        connector: String,
        /// The unit.
        unit: String,
        /// The topic.
        topic: String,
    },
}

impl StatusBoard {
    /// Records that `unit` of `connector` is now in `state` (with `message` saying why). Setting
    /// the state a unit is already in with the same message keeps its `since`.
    pub fn set(&self, connector: &str, unit: &str, state: UnitState, message: Option<&str>) {
        let message = message.map(crate::redact::clean);
        let mut units = self.units.lock().unwrap_or_else(|e| e.into_inner());
        let key = (connector.to_string(), unit.to_string());
        if units.get(&key).is_some_and(|s| s.state == state && s.message == message) {
            return;
        }
        let since_ms = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0);
        let status = UnitStatus { connector: connector.to_string(), unit: unit.to_string(), state, message, since_ms };
        if let Some(listener) = self.listener.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            let _ = listener.send(BoardEvent::Changed(status.clone()));
        }
        units.insert(key, status);
    }

    /// Records that `unit` of `connector` uses `topic` (each unit says so once per topic when it
    /// starts using it).
    pub fn topic_used(&self, connector: &str, unit: &str, topic: &str) {
        self.topics.lock().unwrap_or_else(|e| e.into_inner()).insert((connector.to_string(), topic.to_string()));
        if let Some(listener) = self.listener.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            let _ = listener.send(BoardEvent::TopicUsed { connector: connector.into(), unit: unit.into(), topic: topic.into() });
        }
    }

    /// The topics `connector` used here, by name.
    pub fn topics(&self, connector: &str) -> Vec<String> {
        self.topics.lock().unwrap_or_else(|e| e.into_inner()).iter().filter(|(c, _)| c == connector).map(|(_, t)| t.clone()).collect()
    }

    /// Forgets the topics `connector` used here.
    pub fn reset_topics(&self, connector: &str) {
        self.topics.lock().unwrap_or_else(|e| e.into_inner()).retain(|(c, _)| c != connector);
    }

    /// From now on, every change is also sent to `listener`, in order.
    pub fn listen(&self, listener: tokio::sync::mpsc::UnboundedSender<BoardEvent>) {
        *self.listener.lock().unwrap_or_else(|e| e.into_inner()) = Some(listener);
    }

    /// Waits until the listener handled every change made so far (at once without a listener).
    pub async fn flush(&self) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let sent = self.listener.lock().unwrap_or_else(|e| e.into_inner()).as_ref().is_some_and(|l| l.send(BoardEvent::Flush(tx)).is_ok());
        if sent {
            let _ = rx.await;
        }
    }

    /// Forgets `unit` of `connector` (it runs elsewhere now, or no more), without telling the listener.
    pub fn forget(&self, connector: &str, unit: &str) {
        self.units.lock().unwrap_or_else(|e| e.into_inner()).remove(&(connector.to_string(), unit.to_string()));
    }

    /// Every unit, by connector then unit.
    pub fn snapshot(&self) -> Vec<UnitStatus> {
        self.units.lock().unwrap_or_else(|e| e.into_inner()).values().cloned().collect()
    }

    /// The units of `connector` in `state`.
    pub fn in_state(&self, connector: &str, state: UnitState) -> Vec<UnitStatus> {
        self.snapshot().into_iter().filter(|s| s.connector == connector && s.state == state).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_change_is_recorded_and_a_repeat_keeps_its_start() {
        let board = StatusBoard::default();
        board.set("c", "incident", UnitState::Running, None);
        let first = board.snapshot()[0].since_ms;
        board.set("c", "incident", UnitState::Running, None);
        assert_eq!(board.snapshot()[0].since_ms, first);
        board.set("c", "incident", UnitState::Parked, Some("ServiceNow answered 403 (password=hunter2)"));
        board.set("c", "change_request", UnitState::Running, None);
        let parked = board.in_state("c", UnitState::Parked);
        assert_eq!(parked.len(), 1);
        assert_eq!(parked[0].unit, "incident");
        let message = parked[0].message.as_deref().unwrap();
        assert!(message.contains("403") && !message.contains("hunter2"), "redacted: {message}");
        assert_eq!(board.snapshot().iter().map(|s| s.unit.as_str()).collect::<Vec<_>>(), ["change_request", "incident"]);
    }
}
