//! The fleet's connectors, in `config.storage.topic` (one partition, compacted), as Kafka
//! Connect keeps them: `connector-<name>` → `{"properties":{…}}` (a tombstone deletes it),
//! `target-state-<name>` → `{"state":"STARTED|PAUSED|STOPPED"}`, and `restart-<name>` →
//! `{"id":…,"include_tasks":…,"only_failed":…}` for the latest restart asked for. Every worker
//! reads the whole topic and acts on what it says, so a REST call to any worker acts on the fleet.
//!
//! Properties are stored as written: a secret is a provider reference (`${env:…}`, `${file:…}`)
//! that each worker resolves when it starts the connector, never the value itself
//! ([`snow_runtime::config::check_secrets`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::Result;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::watch;

pub use crate::herder::{ConnectorRecord, RestartRequest, TargetState};
use snow_runtime::state::StateTopic;

/// The configuration topic.
#[derive(Clone)]
pub struct ConfigLog {
    topic: Arc<StateTopic>,
}

#[derive(Serialize, Deserialize)]
struct Properties {
    properties: BTreeMap<String, String>,
}

#[derive(Serialize, Deserialize)]
struct Target {
    state: TargetState,
}

impl ConfigLog {
    /// The log over `topic`.
    pub fn new(topic: Arc<StateTopic>) -> Self {
        Self { topic }
    }

    /// Changes whenever the topic does.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.topic.changes()
    }

    /// Every connector, by name.
    pub fn connectors(&self) -> BTreeMap<String, ConnectorRecord> {
        connectors_of(self.topic.entries())
    }

    /// Log levels set for the whole fleet (`PUT /admin/loggers/{name}?scope=cluster`), by logger.
    pub fn loggers(&self) -> BTreeMap<String, String> {
        loggers_of(self.topic.entries())
    }

    /// Sets `logger` to `level` on every worker of the fleet.
    pub async fn put_logger(&self, logger: &str, level: &str) -> Result<()> {
        let value = serde_json::to_vec(&json!({ "level": level }))?;
        self.topic.write(format!("logger-{logger}").as_bytes(), Some(&value)).await
    }

    /// The connector `name`, if there is one.
    pub fn connector(&self, name: &str) -> Option<ConnectorRecord> {
        self.connectors().remove(name)
    }

    /// Writes `name`'s properties (creating or replacing it), read back before returning.
    pub async fn put(&self, name: &str, properties: &BTreeMap<String, String>, initial: Option<TargetState>) -> Result<()> {
        if let Some(state) = initial {
            self.set_target(name, state).await?;
        }
        let value = serde_json::to_vec(&json!({ "properties": properties }))?;
        self.topic.write(format!("connector-{name}").as_bytes(), Some(&value)).await
    }

    /// Deletes `name` (its properties, target state and restart requests).
    pub async fn delete(&self, name: &str) -> Result<()> {
        self.topic.write(format!("connector-{name}").as_bytes(), None).await?;
        self.topic.write(format!("target-state-{name}").as_bytes(), None).await?;
        self.topic.write(format!("restart-{name}").as_bytes(), None).await
    }

    /// Sets what `name` should be doing.
    pub async fn set_target(&self, name: &str, state: TargetState) -> Result<()> {
        let value = serde_json::to_vec(&Target { state })?;
        self.topic.write(format!("target-state-{name}").as_bytes(), Some(&value)).await
    }

    /// Asks every worker to restart `name` (and its units, or only its failed ones; or, with
    /// `unit`, that one unit only).
    pub async fn request_restart(&self, name: &str, include_tasks: bool, only_failed: bool, unit: Option<&str>) -> Result<RestartRequest> {
        let id = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_micros() as u64).unwrap_or(0);
        let request = RestartRequest { id, include_tasks, only_failed, unit: unit.map(str::to_string) };
        self.topic.write(format!("restart-{name}").as_bytes(), Some(&serde_json::to_vec(&request)?)).await?;
        Ok(request)
    }
}

/// The connectors `entries` (the topic's records, key and value) hold, by name: what any bytes a
/// writer of the topic put there decode to (an undecodable record is skipped).
pub fn connectors_of(entries: impl IntoIterator<Item = (Vec<u8>, Vec<u8>)>) -> BTreeMap<String, ConnectorRecord> {
    let mut properties = BTreeMap::new();
    let mut targets = BTreeMap::new();
    let mut restarts = BTreeMap::new();
    for (key, value) in entries {
        let Ok(key) = String::from_utf8(key) else { continue };
        if let Some(name) = key.strip_prefix("connector-") {
            if let Ok(p) = serde_json::from_slice::<Properties>(&value) {
                properties.insert(name.to_string(), p.properties);
            }
        } else if let Some(name) = key.strip_prefix("target-state-") {
            if let Ok(t) = serde_json::from_slice::<Target>(&value) {
                targets.insert(name.to_string(), t.state);
            }
        } else if let Some(name) = key.strip_prefix("restart-")
            && let Ok(r) = serde_json::from_slice::<RestartRequest>(&value)
        {
            restarts.insert(name.to_string(), r);
        }
    }
    properties
        .into_iter()
        .map(|(name, properties)| {
            let target = targets.get(&name).copied().unwrap_or(TargetState::Started);
            let restart = restarts.get(&name).cloned();
            (name, ConnectorRecord { properties, target, restart })
        })
        .collect()
}

/// The fleet-wide log levels `entries` hold, by logger.
pub fn loggers_of(entries: impl IntoIterator<Item = (Vec<u8>, Vec<u8>)>) -> BTreeMap<String, String> {
    entries
        .into_iter()
        .filter_map(|(k, v)| {
            let logger = String::from_utf8(k).ok()?.strip_prefix("logger-")?.to_string();
            let value: serde_json::Value = serde_json::from_slice(&v).ok()?;
            Some((logger, value["level"].as_str()?.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use snow_runtime::config::check_secrets;

    #[test]
    fn a_secret_value_is_refused_and_a_reference_is_not() {
        let props: BTreeMap<String, String> =
            [("snow.auth.password", "hunter2"), ("snow.auth.client.secret", "${env:SNOW_SECRET}"), ("snow.tables", "incident")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        let errors = check_secrets(&props);
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].key, "snow.auth.password");
        assert!(!errors[0].message.contains("hunter2"));
    }
}
