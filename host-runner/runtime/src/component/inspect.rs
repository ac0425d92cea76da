//! `snow-connect inspect`: what a component is (world and contract version, digest, imports,
//! exports) and what it costs to compile and to instantiate, measured on this machine.

use std::time::{Duration, Instant};

use anyhow::{Result, anyhow};

use super::runtime::{ComponentRuntime, Loaded};
use super::state::{HostState, StoreOptions};
use crate::artefact::Checked;
use crate::metrics::Metrics;
use crate::outbound::Gate;

/// What `inspect` found.
#[derive(Debug)]
pub struct Report {
    /// File size in bytes.
    pub size_bytes: u64,
    /// SHA-256 of the file, hex (what identifies the artefact, and what a signature covers).
    pub digest: String,
    /// The world it implements: `snow:connector/source` or `snow:connector/sink`, with the
    /// contract version.
    pub world: String,
    /// Import names.
    pub imports: Vec<String>,
    /// Export names.
    pub exports: Vec<String>,
    /// Time to compile and pre-instantiate (Cranelift).
    pub compile: Duration,
    /// Mean time to instantiate from the pre-instantiated component.
    pub instantiate_mean: Duration,
    /// Instantiations measured.
    pub instantiations: u32,
}

/// Compiles the component once and instantiates it `n` times in fresh stores.
pub async fn inspect(runtime: &ComponentRuntime, artefact: &Checked, n: u32) -> Result<Report> {
    let size_bytes = artefact.bytes().len() as u64;
    let digest = artefact.digest().to_string();
    let started = Instant::now();
    let loaded = runtime.load(artefact).await?;
    let compile = started.elapsed();
    let engine = runtime.engine();
    let component = loaded.component();
    let names = |it: &mut dyn Iterator<Item = String>| it.collect::<Vec<_>>();
    let imports = names(&mut component.component_type().imports(engine).map(|(n, _)| n.to_string()));
    let exports = names(&mut component.component_type().exports(engine).map(|(n, _)| n.to_string()));
    // Inspection never reaches the network.
    let gate = Gate::closed("inspect");
    let options = StoreOptions { memory_max_bytes: 64 << 20, call_timeout: Duration::from_secs(10) };
    let mut total = Duration::ZERO;
    for _ in 0..n.max(1) {
        let mut store = HostState::new_store(engine, "inspect", "inspect", gate.clone(), Metrics::default(), options);
        let t = Instant::now();
        match &loaded {
            Loaded::Source(pre) => {
                pre.instantiate_async(&mut store).await.map_err(|e| anyhow!("{e:#}"))?;
            }
            Loaded::Sink(pre) => {
                pre.instantiate_async(&mut store).await.map_err(|e| anyhow!("{e:#}"))?;
            }
            Loaded::Transform(pre) => {
                pre.instantiate_async(&mut store).await.map_err(|e| anyhow!("{e:#}"))?;
            }
        }
        total += t.elapsed();
    }
    let world = loaded.world();
    Ok(Report { size_bytes, digest, world, imports, exports, compile, instantiate_mean: total / n.max(1), instantiations: n.max(1) })
}
