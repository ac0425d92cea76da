//! A standalone run's connector files: every `oci://` reference resolved to a verified local
//! file before the connectors are built, with the connector's own `component.registry.*` keys and
//! the default cache ([`crate::settings::default_cache`]). At start and at every SIGHUP, so a
//! reload re-resolves a tag (the way to move to a new release is to push it under the tag and send
//! SIGHUP; a digest never moves).

use anyhow::{Result, bail};
use snow_core::error::ConfigError;
use snow_runtime::config::ReadConnector;

use crate::resolve::{Resolver, reference_keys, resolve_entries};
use crate::settings::{Settings, default_cache, is_key};

/// Resolves the references of every connector in `read`; an error names the file and the key.
pub async fn resolve_read(read: &mut [ReadConnector]) -> Result<()> {
    for connector in read.iter_mut() {
        let mut errors: Vec<ConfigError> = connector
            .entries
            .keys()
            .filter(|k| k.starts_with("component.registry.") && !is_key(k))
            .map(|k| ConfigError::unknown(k, "unknown key (check the spelling and docs/configuration.md)"))
            .collect();
        if errors.is_empty() && !reference_keys(&connector.entries).is_empty() {
            let settings = Settings::read(&connector.entries, default_cache(), &mut errors);
            if errors.is_empty() {
                let resolver = Resolver::new(settings);
                if let Err(refused) = resolve_entries(&mut connector.entries, &resolver).await {
                    errors.extend(refused);
                }
            }
        }
        if !errors.is_empty() {
            let name = connector.entries.get("name").cloned().unwrap_or_default();
            bail!("in {} (connector {name:?}): {}", connector.file.display(), snow_runtime::config::error_lines(&errors).join("; "));
        }
    }
    Ok(())
}
