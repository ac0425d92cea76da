//! What every running connector shares: its spec, the engine, its outbound gate, metrics and store
//! limits; the plugin classes that name a connector's kind; plus the conversions of guest errors
//! into log text and classes.

use std::sync::Arc;

use wasmtime::{Engine, Store};

use crate::component::bindings::types::{ConfigEntry, ErrorClass, SnowError};
use crate::component::swap::Version;
use crate::component::{HostState, StoreOptions};
use crate::config::ConnectorSpec;
use crate::metrics::Metrics;
use crate::outbound::Gate;
use crate::status::StatusBoard;

/// The plugin classes a connector's `connector.class` may name (with their short aliases).
pub const SOURCE_CLASS: &str = "io.snowconnect.ServiceNowSourceConnector";
/// See [`SOURCE_CLASS`].
pub const SINK_CLASS: &str = "io.snowconnect.ServiceNowSinkConnector";

/// A running connector's shared parts.
pub struct ConnectorContext {
    /// The connector's configuration.
    pub spec: ConnectorSpec,
    /// The process's engine.
    pub engine: Engine,
    /// The gate every store of this connector sends through.
    pub gate: Gate,
    /// The process's metrics.
    pub metrics: Metrics,
    /// The process's status board.
    pub status: StatusBoard,
    /// Its transform components by alias (bound in `spec.transforms`), for hot-swaps.
    pub transforms: std::collections::HashMap<String, Arc<crate::component::transform::TransformComponent>>,
    /// The process's push wake-ups, where a source's units register their tables (ADR 0032).
    pub wakes: Arc<crate::push::wakes::Wakes>,
}

impl ConnectorContext {
    /// The connector's name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// A fresh store for the guest instance running `unit`, with ServiceNow sessions of its own.
    pub fn new_store(&self, unit: &str) -> Store<HostState> {
        let options = StoreOptions { memory_max_bytes: self.spec.memory_max_bytes, call_timeout: self.spec.call_timeout };
        HostState::new_store(&self.engine, &self.spec.name, unit, self.gate.for_unit(unit), self.metrics.clone(), options)
    }

    /// A unit's new component version failed in its first calls (`what`) and the connector went
    /// back to `now`: logged, shown on the status board (unit `component`) and counted.
    pub fn rolled_back<P>(&self, unit: &str, rejected: &Version<P>, now: &Version<P>, what: &str) {
        let message = format!(
            "component version {} ({}) failed in its first calls, it {what}: the connector is back on version {} ({})",
            rejected.short(),
            rejected.path,
            now.short(),
            now.path
        );
        tracing::error!(connector = %self.name(), unit, "{message}");
        self.status.set(self.name(), "component", crate::status::UnitState::Running, Some(&message));
        self.metrics.counter_add("snow_component_rollbacks_total", 1, &crate::metrics::labels(&[("connector", self.name())]));
    }

    /// The configuration handed to the guest.
    pub fn guest_config(&self) -> Vec<ConfigEntry> {
        to_entries(self.spec.guest_config.iter())
    }
}

/// Key/value pairs as WIT config entries.
pub fn to_entries<'a>(pairs: impl Iterator<Item = (&'a String, &'a String)>) -> Vec<ConfigEntry> {
    pairs.map(|(k, v)| ConfigEntry { key: k.clone(), value: v.clone() }).collect()
}

/// A guest error's class and a redacted message.
pub fn describe(error: &SnowError) -> (ErrorClass, String) {
    let (class, text) = match error {
        SnowError::Config(list) => {
            let lines = crate::config::error_lines(&crate::component::bindings::config_errors(list, ""));
            (ErrorClass::Fatal, format!("invalid configuration: {}", lines.join("\n  ")))
        }
        SnowError::Http(h) => {
            let detail = h.detail.as_deref().map(|d| format!(" ({d})")).unwrap_or_default();
            let id = h.request_id.as_deref().map(|r| format!(" [request id {r}]")).unwrap_or_default();
            (h.class, format!("ServiceNow answered {}: {}{detail}{id}", h.status, h.message))
        }
        SnowError::Transport(f) => (f.class, f.message.clone()),
        SnowError::Denied(m) => (ErrorClass::Fatal, format!("denied: {m}")),
        SnowError::Data(f) => (f.class, f.message.clone()),
    };
    (class, crate::redact::clean(&text))
}

/// The class as a metric label.
pub fn class_label(class: ErrorClass) -> &'static str {
    match class {
        ErrorClass::Transient => "transient",
        ErrorClass::Fatal => "fatal",
        ErrorClass::Ambiguous => "ambiguous",
    }
}

/// A connector context shared by its tasks.
pub type SharedContext = Arc<ConnectorContext>;
