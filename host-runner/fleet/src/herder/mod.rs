//! What the REST API may ask of a runtime, in one place: the [`Herder`] (Kafka Connect's word),
//! implemented by a fleet (`crate::worker::view`: every answer from its topics, every write to
//! them) and by a standalone run ([`Standalone`]: the connector files it was started with, its
//! status board and offset stores; read-only, so it has no [`Writer`]). Validation is a herder
//! method ([`validate`]: the checks a start would make). The REST API knows nothing else of
//! either; the vocabulary both speak is [`vocabulary`].

pub mod standalone;
pub mod validate;
pub mod vocabulary;

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use anyhow::Result;
use snow_runtime::config::ConfigError;
use snow_runtime::runner::Plan;

pub use standalone::Standalone;
pub use vocabulary::{ConnectorRecord, Published, RestartRequest, TargetState, connect_state};

/// A boxed future of a herder's.
pub type Pending<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What the REST API asks of a runtime.
pub trait Herder: Send + Sync {
    /// Every connector, by name.
    fn connectors(&self) -> BTreeMap<String, ConnectorRecord>;
    /// One connector.
    fn connector(&self, name: &str) -> Option<ConnectorRecord> {
        self.connectors().remove(name)
    }
    /// Its plan, if this process made one.
    fn plan(&self, name: &str) -> Option<Plan>;
    /// Its plan once this process made one, waiting at most `within` for it (a connector just
    /// stored is planned by the worker that reads it back).
    fn planned<'a>(&'a self, name: &'a str, within: Duration) -> Pending<'a, Option<Plan>>;
    /// Its units' statuses, by unit.
    fn unit_statuses(&self, name: &str) -> Vec<(String, Published)>;
    /// Its own status.
    fn connector_status(&self, name: &str) -> Option<Published>;
    /// Its stored offsets: `(partition, position)`.
    fn offsets(&self, name: &str) -> Vec<(String, String)>;
    /// The topics it used (KIP-558), by name.
    fn topics(&self, name: &str) -> Vec<String>;
    /// The errors of `properties` as connector `name`, by key: what starting it here would refuse
    /// (none: it would start).
    fn validate<'a>(&'a self, name: &'a str, properties: &'a BTreeMap<String, String>) -> Pending<'a, Vec<ConfigError>>;
    /// Where writes go (a fleet); none in a standalone run, which answers them `405`.
    fn writer(&self) -> Option<&dyn Writer>;
    /// The Kafka cluster's id, if known.
    fn cluster_id(&self) -> Option<String> {
        None
    }
    /// The push endpoint this listener serves at `/snow/push/<connector>` (a fleet's; a standalone
    /// run takes notifications on `snow.push.listen` instead).
    fn push_endpoint(&self) -> Option<&snow_runtime::push::endpoint::Endpoint> {
        None
    }
}

/// What a fleet takes besides reads (a standalone run takes none: its writes answer `405`).
pub trait Writer: Send + Sync {
    /// `properties` as they are to be stored: a component named `oci://…:tag` pinned to the
    /// digest the tag names now (errors by key: the configuration is refused).
    fn pin<'a>(&'a self, properties: BTreeMap<String, String>) -> Pending<'a, Result<BTreeMap<String, String>, Vec<ConfigError>>> {
        Box::pin(async move { Ok(properties) })
    }
    /// Stores `properties` as connector `name` (created in `initial` state when new).
    fn put_config<'a>(
        &'a self,
        name: &'a str,
        properties: &'a BTreeMap<String, String>,
        initial: Option<TargetState>,
    ) -> Pending<'a, Result<()>>;
    /// Deletes connector `name`.
    fn delete<'a>(&'a self, name: &'a str) -> Pending<'a, Result<()>>;
    /// Sets what connector `name` should be doing.
    fn set_target<'a>(&'a self, name: &'a str, state: TargetState) -> Pending<'a, Result<()>>;
    /// Asks for a restart of `name` (its units too, or only the failed ones; or one unit).
    fn request_restart<'a>(
        &'a self,
        name: &'a str,
        include_tasks: bool,
        only_failed: bool,
        unit: Option<&'a str>,
    ) -> Pending<'a, Result<()>>;
    /// Writes (a position) or removes (`None`) the stored offsets of `name`'s partitions.
    fn write_offsets<'a>(&'a self, name: &'a str, writes: Vec<(String, Option<String>)>) -> Pending<'a, Result<()>>;
    /// Removes every stored offset of `name`.
    fn reset_offsets<'a>(&'a self, name: &'a str) -> Pending<'a, Result<()>>;
    /// Sets `logger` to `level` on every worker.
    fn set_cluster_logger<'a>(&'a self, logger: &'a str, level: &'a str) -> Pending<'a, Result<()>>;
    /// Empties the active topics of `name`.
    fn reset_topics<'a>(&'a self, name: &'a str) -> Pending<'a, Result<()>>;
}
