//! The engine, the linker and component loading.
//!
//! Loading checks what a component imports against an allow-list before pre-instantiating it:
//! a component that wants sockets or a filesystem is refused, even though the empty WASI context
//! would give it nothing. The epoch ticker drives per-call deadlines (see [`super::state`]).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Config, Engine};

use super::bindings::{sink::SinkPre, source::SourcePre, transform::TransformPre};
use super::cache::{CompileCache, Source};
use super::state::HostState;
use crate::artefact::Checked;

/// How often the epoch advances; per-call budgets are counted in these ticks.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// The `snow:connector` contract version this host implements (the package version in `wit/`).
pub const CONTRACT_VERSION: &str = "0.2.0";

/// Import prefixes a connector component may have.
const ALLOWED_IMPORTS: [&str; 6] = ["snow:connector/", "wasi:http/", "wasi:io/", "wasi:clocks/", "wasi:random/", "wasi:cli/"];

/// Which world a component implements, read from its exports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ComponentKind {
    /// Exports `snow:connector/source-api`.
    Source,
    /// Exports `snow:connector/sink-api`.
    Sink,
    /// Exports `snow:connector/transform-api`.
    Transform,
}

/// A component compiled, checked and pre-instantiated.
#[derive(Clone)]
pub enum Loaded {
    /// A source component.
    Source(SourcePre<HostState>),
    /// A sink component.
    Sink(SinkPre<HostState>),
    /// A transform component.
    Transform(TransformPre<HostState>),
}

impl Loaded {
    /// The world it implements.
    pub fn kind(&self) -> ComponentKind {
        match self {
            Self::Source(_) => ComponentKind::Source,
            Self::Sink(_) => ComponentKind::Sink,
            Self::Transform(_) => ComponentKind::Transform,
        }
    }

    /// The compiled component.
    pub fn component(&self) -> &Component {
        match self {
            Self::Source(pre) => pre.instance_pre().component(),
            Self::Sink(pre) => pre.instance_pre().component(),
            Self::Transform(pre) => pre.instance_pre().component(),
        }
    }

    /// The world it implements, with the contract version.
    pub fn world(&self) -> String {
        let name = match self.kind() {
            ComponentKind::Source => "source",
            ComponentKind::Sink => "sink",
            ComponentKind::Transform => "transform",
        };
        format!("snow:connector/{name}@{CONTRACT_VERSION}")
    }
}

/// One engine and one linker for the whole process.
pub struct ComponentRuntime {
    engine: Engine,
    linker: Linker<HostState>,
    ticker_stop: Arc<AtomicBool>,
    cache: Option<CompileCache>,
}

impl ComponentRuntime {
    /// Builds the engine (Cranelift, epoch interruption) and the linker (WASI p2, wasi-http, host).
    pub fn new() -> Result<Self> {
        let mut config = Config::new();
        config.epoch_interruption(true);
        let engine = Engine::new(&config).map_err(|e| anyhow!("creating the wasmtime engine: {e}"))?;
        let mut linker = Linker::<HostState>::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(|e| anyhow!("linking WASI: {e}"))?;
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker).map_err(|e| anyhow!("linking wasi:http: {e}"))?;
        super::bindings::source::snow::connector::host::add_to_linker::<_, HasSelf<HostState>>(&mut linker, |s| s)
            .map_err(|e| anyhow!("linking snow:connector/host: {e}"))?;
        let ticker_stop = Arc::new(AtomicBool::new(false));
        let (ticker_engine, stop) = (engine.clone(), ticker_stop.clone());
        std::thread::Builder::new()
            .name("wasm-epoch".into())
            .spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    ticker_engine.increment_epoch();
                }
            })
            .context("starting the epoch ticker")?;
        Ok(Self { engine, linker, ticker_stop, cache: None })
    }

    /// Keeps compiled components in `dir` ([`CompileCache`]); a directory that cannot be used is
    /// reported and the components are compiled at every start.
    pub fn with_cache(mut self, dir: Option<&Path>) -> Self {
        self.cache = dir.and_then(|d| match CompileCache::open(d) {
            Ok(cache) => Some(cache),
            Err(e) => {
                tracing::warn!("not using the compile cache: {e:#}");
                None
            }
        });
        self
    }

    /// The engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Compiles the checked bytes of a component (off the async threads; from the compile cache
    /// when one is in use and holds it), checks its imports and exports, and pre-instantiates it.
    /// The runner only ever passes bytes whose signature [`Checked::read`] accepted.
    pub async fn load(&self, artefact: &Checked) -> Result<Loaded> {
        let engine = self.engine.clone();
        let path = artefact.path();
        let (owned, wasm, cache) = (path.to_path_buf(), artefact.bytes().to_vec(), self.cache.clone());
        let started = std::time::Instant::now();
        let (component, source) = tokio::task::spawn_blocking(move || -> Result<(Component, Source)> {
            match cache {
                Some(cache) => cache.component(&engine, &wasm, &owned),
                None => Component::new(&engine, &wasm)
                    .map(|c| (c, Source::Compiled))
                    .map_err(|e| anyhow!("compiling component {}: {e:#}", owned.display())),
            }
        })
        .await
        .context("joining the compile task")??;
        let how = if source == Source::Cached { "loaded from the compile cache" } else { "compiled" };
        tracing::info!(component = %path.display(), ms = started.elapsed().as_millis() as u64, "component {how}");
        check_contract(&self.engine, &component).with_context(|| format!("component {}", path.display()))?;
        check_imports(&self.engine, &component).with_context(|| format!("component {}", path.display()))?;
        let exports: Vec<String> = component.component_type().exports(&self.engine).map(|(name, _)| name.to_string()).collect();
        let pre = self.linker.instantiate_pre(&component).map_err(|e| anyhow!("linking component {}: {e:#}", path.display()))?;
        if exports.iter().any(|e| e.starts_with("snow:connector/source-api@")) {
            Ok(Loaded::Source(SourcePre::new(pre).map_err(|e| anyhow!("component {}: {e:#}", path.display()))?))
        } else if exports.iter().any(|e| e.starts_with("snow:connector/sink-api@")) {
            Ok(Loaded::Sink(SinkPre::new(pre).map_err(|e| anyhow!("component {}: {e:#}", path.display()))?))
        } else if exports.iter().any(|e| e.starts_with("snow:connector/transform-api@")) {
            Ok(Loaded::Transform(TransformPre::new(pre).map_err(|e| anyhow!("component {}: {e:#}", path.display()))?))
        } else {
            bail!(
                "component {} exports none of snow:connector/source-api, sink-api, transform-api (it exports {})",
                path.display(),
                exports.join(", ")
            )
        }
    }
}

impl Drop for ComponentRuntime {
    fn drop(&mut self) {
        self.ticker_stop.store(true, Ordering::Relaxed);
    }
}

/// Refuses a component built against another `snow:connector` contract version, naming both (the
/// linker's own error would only say that an import is missing).
fn check_contract(engine: &Engine, component: &Component) -> Result<()> {
    let ty = component.component_type();
    let names = ty.imports(engine).map(|(n, _)| n.to_string()).chain(ty.exports(engine).map(|(n, _)| n.to_string()));
    for name in names {
        let Some(interface) = name.strip_prefix("snow:connector/") else { continue };
        let version = interface.split_once('@').map_or("", |(_, v)| v);
        if version != CONTRACT_VERSION {
            bail!(
                "implements snow:connector@{} ({name}); this host supports snow:connector@{CONTRACT_VERSION}",
                if version.is_empty() { "(no version)" } else { version }
            );
        }
    }
    Ok(())
}

fn check_imports(engine: &Engine, component: &Component) -> Result<()> {
    let refused: Vec<String> = component
        .component_type()
        .imports(engine)
        .map(|(name, _)| name.to_string())
        .filter(|name| !ALLOWED_IMPORTS.iter().any(|p| name.starts_with(p)))
        .collect();
    if refused.is_empty() {
        Ok(())
    } else {
        bail!("imports {} which connectors may not use (allowed: {})", refused.join(", "), ALLOWED_IMPORTS.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_contract_version_is_the_wit_packages() {
        let wit = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../wit/types.wit")).unwrap();
        assert!(
            wit.starts_with(&format!("package snow:connector@{CONTRACT_VERSION};")),
            "wit/types.wit: {}",
            wit.lines().next().unwrap_or("")
        );
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_component_of_another_contract_version_is_refused_naming_both() {
        // The sink component with every snow:connector interface renamed to @0.9.0 (same length).
        let mut bytes = std::fs::read(guest_artifacts::GUEST_SINK).unwrap();
        let (needle, from, to) = (b"snow:connector/", b"@0.2.0", b"@0.9.0");
        let mut i = 0;
        while let Some(at) = bytes[i..].windows(needle.len()).position(|w| w == needle) {
            let start = i + at + needle.len();
            if let Some(v) = bytes[start..(start + 40).min(bytes.len())].windows(from.len()).position(|w| w == from) {
                bytes[start + v..start + v + from.len()].copy_from_slice(to);
            }
            i = start;
        }
        let path = std::env::temp_dir().join(format!("snow-contract-{}.wasm", std::process::id()));
        std::fs::write(&path, &bytes).unwrap();
        let runtime = ComponentRuntime::new().unwrap();
        let err = runtime.load(&Checked::inspect(&path, &crate::artefact::TrustPolicy::unsigned()).unwrap()).await.err().expect("refused");
        let text = format!("{err:#}");
        assert!(text.contains("implements snow:connector@0.9.0") && text.contains("this host supports snow:connector@0.2.0"), "{text}");
        let _ = std::fs::remove_file(&path);
    }
}
