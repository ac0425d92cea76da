//! Checking a translation with the runtime's own configuration parsers (the host's
//! [`ConnectorSpec::from_entries`] and snow-core's source and sink configuration, the component's
//! own `validate` natively), so that "passes through unchanged" means "this runtime takes it": a
//! converter option, transform or producer setting it refuses turns its row MANUAL with the
//! parser's words, and a problem no row produced is listed on the connector.

use std::collections::BTreeMap;

use super::output::Connector;
use super::rules::{Class, is_reference};
use snow_runtime::config::ConnectorSpec;

/// Deployment keys: their problems are the deployment's to solve (listed apart), not a row's.
fn is_deployment_key(key: &str) -> bool {
    key.starts_with("component.") || key == "kafka.bootstrap.servers"
}

/// A key naming a TLS store file of the workers (`snow.instance.ssl.keystore.location`, a
/// converter's `schema.registry.ssl.truststore.location`, ...).
pub(crate) fn is_store_file_key(key: &str) -> bool {
    ["snow.instance.ssl.", "key.converter.schema.registry.ssl.", "value.converter.schema.registry.ssl."]
        .iter()
        .filter_map(|p| key.strip_prefix(p))
        .any(|k| snow_runtime::transport::tls::FILE_KEYS.contains(&k))
}

/// What the check reads instead of a reference it cannot resolve here.
fn stand_in(key: &str) -> String {
    if key.ends_with("user.info") {
        "stand-in:stand-in".into()
    } else if key.ends_with(".url") {
        "https://stand-in.invalid".into()
    } else if key == "kafka.bootstrap.servers" {
        "stand-in.invalid:9092".into()
    } else {
        "stand-in".into()
    }
}

/// The (key, message) problems the runtime finds in `config`.
pub fn problems(config: &BTreeMap<String, String>) -> Vec<(String, String)> {
    let mut entries: BTreeMap<String, String> =
        config.iter().map(|(k, v)| (k.clone(), if is_reference(v) { stand_in(k) } else { v.clone() })).collect();
    // The signing keys are the deployment's files: whether they exist where the migration runs
    // says nothing about the translation.
    for key in snow_runtime::config::TRUST_KEYS {
        entries.remove(key);
    }
    // So are TLS stores named by file (the instance's, a registry's): they live on the workers.
    entries.retain(|k, _| !is_store_file_key(k));
    entries.insert("component.allow.unsigned".into(), "true".into());
    let mut found = Vec::new();
    let guest = match ConnectorSpec::from_entries(entries.clone()) {
        Ok(spec) => spec.guest_config,
        Err(e) => {
            match e.downcast_ref::<snow_runtime::config::InvalidConfig>() {
                Some(refused) => found.extend(refused.errors.iter().map(|e| (e.key.clone(), e.message.clone()))),
                None => found.push(("(configuration)".into(), format!("{e:#}"))),
            }
            entries
                .iter()
                .filter(|(k, _)| k.starts_with("snow.") && !snow_runtime::config::is_host_only_snow_key(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        }
    };
    let parsed = if entries.contains_key("topics") || entries.contains_key("topics.regex") {
        snow_core::config::SinkConfig::parse(&guest).err()
    } else {
        snow_core::config::SourceConfig::parse(&guest).err()
    };
    if let Some(snow_core::error::SnowError::Config(errors)) = parsed {
        found.extend(errors.into_iter().map(|e| (e.key, e.message)));
    } else if let Some(other) = parsed {
        found.push(("(configuration)".into(), other.to_string()));
    }
    found.sort();
    found.dedup();
    found
}

/// `("transforms", alias)` for a key of a transform stage (or a predicate's).
fn stage_of(key: &str) -> Option<(&'static str, &str)> {
    ["transforms", "predicates"].into_iter().find_map(|list| {
        key.strip_prefix(list).and_then(|r| r.strip_prefix('.')).and_then(|r| r.split_once('.')).map(|(alias, _)| (list, alias))
    })
}

/// Checks `c` and marks its rows: a row whose key of ours is refused becomes MANUAL with the
/// reason and the key leaves the configuration (so what is written is what this runtime takes);
/// other problems go to the connector's list.
pub fn check(c: &mut Connector) {
    // Taking a refused key out can reveal another problem (a key it was required with): look again.
    for _ in 0..3 {
        let mut removed = false;
        for (key, message) in problems(&c.config) {
            if is_deployment_key(&key) {
                if !c.deployment.iter().any(|d| d.starts_with(&format!("{key}:"))) {
                    c.deployment.push(format!("{key}: {message}"));
                }
                continue;
            }
            // A refused transform (or predicate) goes whole: its alias and every key of it.
            let (keys, why) = match stage_of(&key) {
                Some((list, alias)) => {
                    let prefix = format!("{list}.{alias}.");
                    let keys: Vec<String> = c.config.keys().filter(|k| k.starts_with(&prefix)).cloned().collect();
                    if let Some(names) = c.config.get_mut(list) {
                        *names = names.split(',').map(str::trim).filter(|n| *n != alias).collect::<Vec<_>>().join(",");
                    }
                    (keys, format!("this runtime refuses {key}: {message} (the {list} stage {alias} is left out of the files written)"))
                }
                None => (vec![key.clone()], format!("this runtime refuses {key}: {message} (left out of the files written)")),
            };
            let mut owned = false;
            for r in c.rows.iter_mut().filter(|r| r.row.ours.iter().any(|o| keys.contains(o))) {
                owned = true;
                r.row.class = Class::Manual;
                r.row.note.clone_from(&why);
            }
            let mut taken = false;
            for k in &keys {
                taken |= c.config.remove(k).is_some();
            }
            if owned && taken {
                removed = true;
            } else if !c.problems.iter().any(|p| p.starts_with(&format!("{key}: "))) {
                c.problems.push(format!("{key}: {message}"));
            }
        }
        if !removed {
            break;
        }
    }
}
