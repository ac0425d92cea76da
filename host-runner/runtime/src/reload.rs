//! Applying re-read connector files to the running process (SIGHUP): a connector whose component
//! changed gets the new version hot-swapped.
//!
//! The new version is checked as start-up checks it ([`ConnectorSpec::component`]: signature and
//! pinned `component.digest`), compiled and pre-instantiated (off the async
//! threads), and asked to validate the running connector's configuration (a source also plans its
//! units) before it is published to the connector's versions; until then, and whenever any of these
//! fails, the old version keeps running and the reason is logged and shown on the status board
//! (unit `component`). Units take a published version at their next batch boundary
//! ([`crate::component::swap`]). Other changed keys are named and take effect at the next start.
//!
//! A transform component whose file changed is checked the same way
//! ([`ConnectorSpec::transform_component`]), compiled, asked to validate its keys and published to
//! its stage: calls after that open the new version, calls running finish on the old one.

use anyhow::{Result, bail};

use crate::artefact::Checked;
use crate::component::Loaded;
use crate::config::ConnectorSpec;
use crate::runner::{ConnectorVersions, Runner};
use crate::status::UnitState;

/// What a reload did to one connector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reloaded {
    /// The component is unchanged (same bytes).
    Unchanged,
    /// A new version was published; units take it at their next batch boundary.
    Published {
        /// Digest (short) of the version replaced.
        from: String,
        /// Digest (short) of the new one.
        to: String,
    },
    /// The new version was refused; the old one keeps running.
    Kept(String),
    /// No running connector has this name.
    NotRunning,
}

impl Runner {
    /// Applies `specs` (the re-read connector files) to the running connectors; one result per spec.
    pub async fn reload(&self, specs: &[ConnectorSpec]) -> Vec<(String, Reloaded)> {
        let mut results = Vec::new();
        for spec in specs {
            let result = self.reload_one(spec).await;
            match &result {
                Reloaded::Unchanged => tracing::info!(connector = spec.name, "reload: the component is unchanged"),
                Reloaded::Published { from, to } => tracing::info!(
                    connector = spec.name,
                    "reload: component version {from} replaced by {to} ({}); every unit takes it at its next batch boundary",
                    spec.component_path.display()
                ),
                Reloaded::Kept(why) => {
                    tracing::error!(connector = spec.name, "reload: keeping the running component version: {why}");
                    self.status().set(&spec.name, "component", UnitState::Running, Some(&format!("the new version was refused: {why}")));
                }
                Reloaded::NotRunning => {
                    tracing::warn!(connector = spec.name, "reload: no such connector is running; new connectors start at the next start")
                }
            }
            if result != Reloaded::NotRunning {
                self.reload_transforms(spec).await;
            }
            results.push((spec.name.clone(), result));
        }
        results
    }

    /// Publishes each changed transform component of `spec` to its running stage.
    async fn reload_transforms(&self, spec: &ConnectorSpec) {
        let Some(ctx) = self.running.lock().unwrap_or_else(|e| e.into_inner()).get(&spec.name).map(|r| r.ctx.clone()) else { return };
        for stage in &spec.transform_components {
            let Some(running) = ctx.transforms.get(&stage.alias) else {
                tracing::warn!(connector = spec.name, transform = stage.alias, "reload: a new transform takes effect at the next start");
                continue;
            };
            let published = async {
                let artefact = spec.transform_component(stage)?;
                if artefact.digest() == running.digest() {
                    return Ok(None);
                }
                let crate::component::Loaded::Transform(pre) = self.runtime().load(&artefact).await? else {
                    bail!("{} is not a transform component", stage.path.display());
                };
                let problems = running.with(pre.clone(), artefact.digest()).validate().await?;
                if !problems.is_empty() {
                    bail!("{}", crate::config::error_lines(&problems).join("; "));
                }
                let from = running.digest();
                running.publish(pre, artefact.digest());
                Ok(Some((from, artefact.digest().to_string())))
            };
            match published.await {
                Ok(None) => tracing::info!(connector = spec.name, transform = stage.alias, "reload: the transform component is unchanged"),
                Ok(Some((from, to))) => tracing::info!(
                    connector = spec.name,
                    transform = stage.alias,
                    "reload: transform component version {} replaced by {} ({}); records after this call it",
                    &from[..12.min(from.len())],
                    &to[..12],
                    stage.path.display()
                ),
                Err(e) => {
                    let why = format!("transform {}: {e:#}", stage.alias);
                    tracing::error!(
                        connector = spec.name,
                        transform = stage.alias,
                        "reload: keeping the running transform component version: {why}"
                    );
                    self.status().set(&spec.name, "component", UnitState::Running, Some(&format!("the new version was refused: {why}")));
                }
            }
        }
    }

    async fn reload_one(&self, spec: &ConnectorSpec) -> Reloaded {
        let Some((ctx, versions)) =
            self.running.lock().unwrap_or_else(|e| e.into_inner()).get(&spec.name).map(|r| (r.ctx.clone(), r.versions.clone()))
        else {
            return Reloaded::NotRunning;
        };
        let current = match &versions {
            ConnectorVersions::Source(versions) => versions.current().digest.clone(),
            ConnectorVersions::Sink(versions) => versions.current().digest.clone(),
        };
        let changed = changed_keys(&ctx.spec, spec);
        if !changed.is_empty() {
            tracing::warn!(
                connector = spec.name,
                "reload: {} changed; only the component is replaced while running, the rest takes effect at the next start",
                changed.join(", ")
            );
        }
        let artefact = match spec.component() {
            Ok(artefact) => artefact,
            Err(e) => return Reloaded::Kept(format!("{e:#}")),
        };
        if artefact.digest() == current {
            return Reloaded::Unchanged;
        }
        match self.publish(&ctx, &versions, &artefact).await {
            Ok(()) => Reloaded::Published { from: current[..12].to_string(), to: artefact.digest()[..12].to_string() },
            Err(e) => Reloaded::Kept(format!("{e:#}")),
        }
    }

    /// Compiles, validates and publishes `artefact` as the connector's new version in `versions`.
    async fn publish(&self, ctx: &crate::connector::SharedContext, versions: &ConnectorVersions, artefact: &Checked) -> Result<()> {
        let loaded = self.runtime().load(artefact).await?;
        let path = artefact.path().display().to_string();
        match (versions, loaded) {
            (ConnectorVersions::Source(versions), Loaded::Source(pre)) => {
                crate::source::plan(ctx, &pre).await?;
                versions.publish(pre, artefact.digest(), &path);
            }
            (ConnectorVersions::Sink(versions), Loaded::Sink(pre)) => {
                crate::sink::validate(ctx, &pre).await?;
                versions.publish(pre, artefact.digest(), &path);
            }
            (_, loaded) => bail!("{} is a {:?} component; the running connector is not", path, loaded.kind()),
        }
        Ok(())
    }
}

/// The keys, other than the component's, whose values differ between `running` and `new`.
fn changed_keys(running: &ConnectorSpec, new: &ConnectorSpec) -> Vec<String> {
    let mut changed: Vec<String> = running
        .guest_config
        .iter()
        .filter(|(k, v)| new.guest_config.get(*k) != Some(v))
        .map(|(k, _)| k.clone())
        .chain(new.guest_config.keys().filter(|k| !running.guest_config.contains_key(*k)).cloned())
        .collect();
    let host = [
        ("tasks.max", running.tasks_max != new.tasks_max),
        ("kafka.bootstrap.servers", running.kafka.bootstrap_servers != new.kafka.bootstrap_servers),
        ("kafka.producer.*", running.kafka.producer != new.kafka.producer),
        ("kafka.consumer.*", running.kafka.consumer != new.kafka.consumer),
        ("topics", running.topics != new.topics),
        ("offset.storage.file.filename", running.offsets_file != new.offsets_file),
        ("offset.storage.topic", running.offsets_topic.as_ref().map(|t| &t.name) != new.offsets_topic.as_ref().map(|t| &t.name)),
    ];
    changed.extend(host.iter().filter(|(_, differs)| *differs).map(|(k, _)| k.to_string()));
    changed
}
