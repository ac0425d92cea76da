//! The `component.*` section: which component a connector runs (a file, pinned by digest when
//! asked), the signature it must carry ([`super::artefact`]), and the limits its instances get.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use snow_core::error::ConfigError;

use crate::artefact::TrustPolicy;

/// 256 MiB holds a 10,000-row page of wide rows twice over.
pub fn default_memory_max_bytes() -> usize {
    256 << 20
}

/// A single call includes waiting for ServiceNow (up to its 60 s quota) and retries; 10 minutes
/// only ever stops a guest that is truly stuck.
fn default_call_timeout_ms() -> u64 {
    600_000
}

/// The section as read.
pub struct Component {
    /// `component.path`.
    pub path: PathBuf,
    /// `component.digest`, the hex digest.
    pub digest: Option<String>,
    /// `component.memory.max.bytes`.
    pub memory_max_bytes: usize,
    /// `component.call.timeout.ms`.
    pub call_timeout: Duration,
    /// `component.trap.budget`.
    pub trap_budget: u32,
    /// The signing policy.
    pub trust: Arc<TrustPolicy>,
}

/// Reads the section.
pub fn read(entries: &BTreeMap<String, String>, errors: &mut Vec<ConfigError>) -> Component {
    let path = super::required(entries, "component.path", "the .wasm component to run", errors);
    let number = |k: &str, default: u64, min: u64, max: u64, errors: &mut Vec<ConfigError>| {
        super::whole_number(entries, k, default, min, max, errors)
    };
    let digest = super::value(entries, "component.digest").and_then(|d| match crate::artefact::parse_ref(&d) {
        Ok(hex) => Some(hex),
        Err(e) => {
            errors.push(ConfigError::new("component.digest", format!("{e:#}")));
            None
        }
    });
    if entries.contains_key("component.ref") {
        errors.push(ConfigError::refused(
            "component.ref",
            "sha256:<hex> names a component in a fleet's component.storage.topic (snow-connect worker); a standalone run names \
             an OCI registry's component (oci://registry/repository:tag or @sha256:<hex>) or its file with component.path, \
             which component.digest=sha256:<hex> may pin",
        ));
    }
    let memory_max_bytes = number("component.memory.max.bytes", default_memory_max_bytes() as u64, 16 << 20, 4 << 30, errors) as usize;
    let call_timeout = Duration::from_millis(number("component.call.timeout.ms", default_call_timeout_ms(), 1000, 86_400_000, errors));
    let trap_budget = number("component.trap.budget", 5, 1, 1_000_000, errors) as u32;
    let trust = super::artefact::trust_policy(entries, errors);
    Component { path: PathBuf::from(path), digest, memory_max_bytes, call_timeout, trap_budget, trust }
}
