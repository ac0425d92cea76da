//! The fleet as the REST API sees it, its [`Herder`]: every answer from its topics, every write to
//! them.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Result;

use super::Fleet;
use crate::herder::validate::{self, Checks};
use crate::herder::{ConnectorRecord, Herder, Pending, Published, TargetState, Writer};
use snow_runtime::config::{ConfigError, ConnectorSpec};
use snow_runtime::runner::{Plan, Runner};

impl Herder for Fleet {
    fn connectors(&self) -> BTreeMap<String, ConnectorRecord> {
        self.configs.connectors()
    }

    fn connector(&self, name: &str) -> Option<ConnectorRecord> {
        self.configs.connector(name)
    }

    fn plan(&self, name: &str) -> Option<Plan> {
        self.runner.plan(name)
    }

    fn unit_statuses(&self, name: &str) -> Vec<(String, Published)> {
        self.status.units(name)
    }

    fn connector_status(&self, name: &str) -> Option<Published> {
        self.status.connector(name)
    }

    fn offsets(&self, name: &str) -> Vec<(String, String)> {
        self.offsets.entries().into_iter().filter(|(c, _, _)| c == name).map(|(_, p, v)| (p, v)).collect()
    }

    fn topics(&self, name: &str) -> Vec<String> {
        self.status.topics(name)
    }

    fn writer(&self) -> Option<&dyn Writer> {
        Some(self)
    }

    fn cluster_id(&self) -> Option<String> {
        self.cluster_id.clone()
    }

    fn push_endpoint(&self) -> Option<&snow_runtime::push::endpoint::Endpoint> {
        self.push_endpoint.get()
    }

    fn planned<'a>(&'a self, name: &'a str, within: Duration) -> Pending<'a, Option<Plan>> {
        Box::pin(self.runner.planned(name, within))
    }

    fn validate<'a>(&'a self, name: &'a str, properties: &'a BTreeMap<String, String>) -> Pending<'a, Vec<ConfigError>> {
        Box::pin(validate::check(self, name, properties))
    }
}

impl Checks for Fleet {
    fn stores_configurations(&self) -> bool {
        true
    }

    fn runner(&self) -> &Runner {
        &self.runner
    }

    fn spec<'a>(&'a self, name: &'a str, properties: &'a BTreeMap<String, String>) -> Pending<'a, Result<ConnectorSpec>> {
        Box::pin(crate::worker::connectors::fleet_spec(self, name, properties))
    }
}

impl Writer for Fleet {
    fn pin<'a>(&'a self, mut properties: BTreeMap<String, String>) -> Pending<'a, Result<BTreeMap<String, String>, Vec<ConfigError>>> {
        Box::pin(async move { crate::worker::connectors::pin_oci(self, &mut properties).await.map(|()| properties) })
    }

    fn put_config<'a>(
        &'a self,
        name: &'a str,
        properties: &'a BTreeMap<String, String>,
        initial: Option<TargetState>,
    ) -> Pending<'a, Result<()>> {
        Box::pin(self.configs.put(name, properties, initial))
    }

    fn delete<'a>(&'a self, name: &'a str) -> Pending<'a, Result<()>> {
        Box::pin(self.configs.delete(name))
    }

    fn set_target<'a>(&'a self, name: &'a str, state: TargetState) -> Pending<'a, Result<()>> {
        Box::pin(self.configs.set_target(name, state))
    }

    fn request_restart<'a>(
        &'a self,
        name: &'a str,
        include_tasks: bool,
        only_failed: bool,
        unit: Option<&'a str>,
    ) -> Pending<'a, Result<()>> {
        Box::pin(async move { self.configs.request_restart(name, include_tasks, only_failed, unit).await.map(drop) })
    }

    fn write_offsets<'a>(&'a self, name: &'a str, writes: Vec<(String, Option<String>)>) -> Pending<'a, Result<()>> {
        let (store, name) = (self.offsets.clone(), name.to_string());
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                for (partition, position) in writes {
                    match position {
                        Some(position) => snow_runtime::offsets::OffsetStore::commit(&store, &name, &partition, &position)?,
                        None => {
                            store.remove(&name, |p| p == partition)?;
                        }
                    }
                }
                anyhow::Ok(())
            })
            .await?
        })
    }

    fn reset_offsets<'a>(&'a self, name: &'a str) -> Pending<'a, Result<()>> {
        let (store, name) = (self.offsets.clone(), name.to_string());
        Box::pin(async move { tokio::task::spawn_blocking(move || store.remove(&name, |_| true).map(drop)).await? })
    }

    fn reset_topics<'a>(&'a self, name: &'a str) -> Pending<'a, Result<()>> {
        Box::pin(self.status.reset_topics(name))
    }

    fn set_cluster_logger<'a>(&'a self, logger: &'a str, level: &'a str) -> Pending<'a, Result<()>> {
        Box::pin(self.configs.put_logger(logger, level))
    }
}
