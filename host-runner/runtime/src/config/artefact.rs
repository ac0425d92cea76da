//! A connector's `component.*` trust keys: which keys may sign its component, where the bundle
//! is, and whether an unverified component may run. Read once, keys parsed at load, so a missing
//! or malformed key file is a configuration error naming the key. [`ConnectorSpec::component`] is
//! the one check of a component file against a connector (signature and pinned digest), at start
//! and at a SIGHUP hot-swap alike.

use snow_core::error::ConfigError;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};

use super::ConnectorSpec;
use crate::artefact::{Checked, TrustPolicy, TrustedKey};

/// The keys this module reads.
pub const KEYS: [&str; 4] = ["component.trusted.keys", "component.trusted.root", "component.bundle.path", "component.allow.unsigned"];

/// Builds the trust policy from `entries`, pushing each problem (named by its key) to `errors`.
pub fn trust_policy(entries: &BTreeMap<String, String>, errors: &mut Vec<ConfigError>) -> Arc<TrustPolicy> {
    let get = |k: &str| entries.get(k).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
    let keys: Vec<TrustedKey> = get("component.trusted.keys")
        .map(|list| {
            list.split(',')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .filter_map(|p| match TrustedKey::from_pem_file(&PathBuf::from(p)) {
                    Ok(key) => Some(key),
                    Err(e) => {
                        errors.push(ConfigError::new("component.trusted.keys", format!("{e:#}")));
                        None
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    let root = get("component.trusted.root").and_then(|p| match std::fs::read_to_string(&p) {
        Ok(text) => Some(text),
        Err(e) => {
            errors.push(ConfigError::new("component.trusted.root", format!("reading {p}: {e}")));
            None
        }
    });
    let allow_unsigned = match get("component.allow.unsigned").as_deref() {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => {
            errors.push(ConfigError::new("component.allow.unsigned", format!("must be true or false, got {other:?}")));
            false
        }
    };
    if keys.is_empty() && !allow_unsigned && !errors.iter().any(|e| e.key == "component.trusted.keys") {
        errors.push(ConfigError::missing(
            "component.trusted.keys",
            "is required: the PEM public keys that may sign the component (or component.allow.unsigned=true, for development only)",
        ));
    }
    let bundle_path = get("component.bundle.path").map(PathBuf::from);
    let policy = TrustPolicy::new(keys, root.as_deref(), bundle_path.clone(), allow_unsigned).unwrap_or_else(|e| {
        errors.push(ConfigError::new("component.trusted.root", format!("{e:#}")));
        TrustPolicy::new(Vec::new(), None, bundle_path, allow_unsigned).expect("the empty trusted root is valid")
    });
    Arc::new(policy)
}

impl ConnectorSpec {
    /// Reads the connector's component and checks it against the connector: its signature under
    /// the connector's trust policy, and the digest `component.digest` pins. What start-up runs
    /// and what a hot-swap publishes pass this same check.
    pub fn component(&self) -> Result<Checked> {
        let artefact = Checked::read(&self.component_path, &self.trust).with_context(|| format!("connector {}", self.name))?;
        if let Some(pinned) = self.component_digest.as_deref().filter(|pinned| *pinned != artefact.digest()) {
            return Err(super::InvalidConfig::one(
                &self.name,
                ConfigError::refused(
                    "component.digest",
                    format!(
                        "component {} has digest sha256:{}, the configuration pins sha256:{pinned}; refused",
                        self.component_path.display(),
                        artefact.digest()
                    ),
                ),
            )
            .into());
        }
        Ok(artefact)
    }
}
