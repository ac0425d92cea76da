//! What a migration writes: for each connector of ours, `<name>.properties` (for `snow-connect
//! run`) and `<name>.json` (`{"name","config"}` for a fleet's `POST /connectors`), with every
//! literal secret of the old configurations replaced by an `${env:SNOW_<NAME>_<KEY>}` placeholder,
//! and the report beside them. The last step scrubs every written text of those literals, so a
//! secret that also appeared under a key not taken for a credential cannot leak either.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};

use super::fold::Group;
use super::translate::{Row, Setting};
use super::{DEFAULT_SINK_COMPONENT, DEFAULT_SOURCE_COMPONENT, Options, Product};
use snow_runtime::connector::{SINK_CLASS, SOURCE_CLASS};

/// An environment variable a translated configuration reads a credential from.
#[derive(Clone, Debug, serde::Serialize)]
pub struct EnvVar {
    /// The variable.
    pub name: String,
    /// Our key that reads it.
    pub key: String,
}

/// One connector of ours, ready to write.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Connector {
    /// Its name.
    pub name: String,
    /// `source` or `sink`.
    pub kind: &'static str,
    /// The old connectors it replaces: (product, name, file).
    pub from: Vec<Old>,
    /// Every old key's row, with the old connector it belongs to.
    pub rows: Vec<OwnedRow>,
    /// Sources on the same instance that were not folded in, and the keys that kept them apart.
    pub apart: Vec<(String, Vec<String>)>,
    /// Our configuration as written to `<name>.properties`.
    pub config: BTreeMap<String, String>,
    /// The environment variables its placeholders read.
    pub env: Vec<EnvVar>,
    /// What the deployment must still supply (keys the old configurations cannot give).
    pub deployment: Vec<String>,
    /// What the runtime's own configuration check said about keys no row produced.
    pub problems: Vec<String>,
}

/// An old connector a connector of ours replaces.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Old {
    /// What it was.
    pub product: Product,
    /// Its name.
    pub name: String,
    /// The file it came from.
    pub file: String,
}

/// A report row with the old connector it belongs to.
#[derive(Clone, Debug, serde::Serialize)]
pub struct OwnedRow {
    /// The old connector's name.
    pub connector: String,
    /// The row.
    #[serde(flatten)]
    pub row: Row,
}

/// Keys a fleet's worker owns: left out of the `POST /connectors` JSON.
pub fn fleet_owned(key: &str) -> bool {
    key == "kafka.bootstrap.servers"
        || key.strip_prefix("kafka.").is_some_and(snow_runtime::kafka::security::is_security_key)
        || snow_runtime::config::TRUST_KEYS.contains(&key)
        || key.starts_with("offset.storage.")
}

/// `SNOW_<NAME>_<KEY>` for our `key` of connector `name`.
pub fn env_name(name: &str, key: &str) -> String {
    let up = |s: &str| s.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_uppercase() } else { '_' }).collect::<String>();
    format!("SNOW_{}_{}", up(name), up(key.strip_prefix("snow.").unwrap_or(key)))
}

/// Builds our connectors from the folded groups: names, deployment keys, placeholders.
pub fn assemble(groups: &[Group], options: &Options) -> Vec<Connector> {
    let mut taken = std::collections::BTreeSet::new();
    groups
        .iter()
        .map(|g| {
            let sink = g.is_sink();
            let mut name = if g.members.len() == 1 { g.members[0].old.name.clone() } else { folded_name(g) };
            let base = name.clone();
            let mut n = 2;
            while !taken.insert(name.clone()) {
                name = format!("{base}-{n}");
                n += 1;
            }
            let mut config = BTreeMap::new();
            let mut env = Vec::new();
            for (k, v) in g.config() {
                let value = match v {
                    Setting::Text(t) => t,
                    Setting::Secret(_) => {
                        let var = env_name(&name, &k);
                        env.push(EnvVar { name: var.clone(), key: k.clone() });
                        format!("${{env:{var}}}")
                    }
                };
                config.insert(k, value);
            }
            // Every variable a value reads, the user's own references and the placeholders made
            // for what Confluent Cloud supplied (its Schema Registry), besides the credentials.
            for (k, v) in &config {
                for var in env_references(v) {
                    if !env.iter().any(|e| e.name == var) {
                        env.push(EnvVar { name: var, key: k.clone() });
                    }
                }
            }
            config.insert("name".into(), name.clone());
            config.insert("connector.class".into(), if sink { SINK_CLASS } else { SOURCE_CLASS }.into());
            let component = if sink { &options.sink_component } else { &options.source_component };
            config.insert(
                "component.path".into(),
                component.clone().unwrap_or_else(|| if sink { DEFAULT_SINK_COMPONENT } else { DEFAULT_SOURCE_COMPONENT }.into()),
            );
            let from: Vec<String> = g.members.iter().map(|m| format!("{}:{}", m.old.product.id(), m.old.name)).collect();
            config.insert("snow.migrated.from".into(), from.join(","));
            let mut deployment = Vec::new();
            match &options.bootstrap {
                Some(b) => {
                    config.insert("kafka.bootstrap.servers".into(), b.clone());
                }
                None => {
                    config.insert("kafka.bootstrap.servers".into(), "${env:SNOW_KAFKA_BOOTSTRAP_SERVERS}".into());
                    env.push(EnvVar { name: "SNOW_KAFKA_BOOTSTRAP_SERVERS".into(), key: "kafka.bootstrap.servers".into() });
                    deployment.push("kafka.bootstrap.servers: the Kafka cluster (--bootstrap, or SNOW_KAFKA_BOOTSTRAP_SERVERS for the connector file; a fleet's worker has its own)".into());
                }
            }
            match &options.trusted_keys {
                Some(keys) => {
                    config.insert("component.trusted.keys".into(), keys.clone());
                }
                None => deployment.push(
                    "component.trusted.keys: the public keys that sign the components (--trusted-keys; a fleet's worker has its own)".into(),
                ),
            }
            if component.is_none() {
                deployment.push(format!(
                    "component.path: where {} is (--{}-component; in a fleet, under the worker's plugin.path)",
                    if sink { DEFAULT_SINK_COMPONENT } else { DEFAULT_SOURCE_COMPONENT },
                    if sink { "sink" } else { "source" }
                ));
            }
            let rows = g
                .members
                .iter()
                .flat_map(|m| m.rows.iter().map(|r| OwnedRow { connector: m.old.name.clone(), row: r.clone() }))
                .collect();
            Connector {
                name,
                kind: if sink { "sink" } else { "source" },
                from: g
                    .members
                    .iter()
                    .map(|m| Old { product: m.old.product, name: m.old.name.clone(), file: m.old.file.display().to_string() })
                    .collect(),
                rows,
                apart: g.apart.clone(),
                config,
                env,
                deployment,
                problems: Vec::new(),
            }
        })
        .collect()
}

/// The variables `${env:NAME}` references in `value` read.
fn env_references(value: &str) -> Vec<String> {
    value.match_indices("${env:").filter_map(|(i, _)| value[i + 6..].split_once('}').map(|(name, _)| name.to_string())).collect()
}

/// `servicenow-<instance>-source` for connectors folded together.
fn folded_name(g: &Group) -> String {
    let label = match g.members[0].config.get("snow.instance.url") {
        Some(Setting::Text(url)) => url.split("://").nth(1).and_then(|h| h.split(['.', ':', '/']).next()).unwrap_or("instance").to_string(),
        _ => "instance".into(),
    };
    format!("servicenow-{label}-source")
}

/// The connector file: Java properties, one key per line, escaped as `Properties.load` reads them.
pub fn properties(c: &Connector) -> String {
    let mut out = format!(
        "# {} connector translated by `snow-connect migrate confluent` from {}\n",
        c.kind,
        c.from.iter().map(|o| format!("{} ({})", o.name, o.product.title())).collect::<Vec<_>>().join(", ")
    );
    if !c.env.is_empty() {
        out.push_str(&format!("# set before running: {}\n", c.env.iter().map(|e| e.name.as_str()).collect::<Vec<_>>().join(", ")));
    }
    for (k, v) in &c.config {
        out.push_str(&escape(k, true));
        out.push('=');
        out.push_str(&escape(v, false));
        out.push('\n');
    }
    out
}

fn escape(text: &str, key: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for (i, ch) in text.chars().enumerate() {
        match ch {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '=' | ':' | '#' | '!' if key => {
                out.push('\\');
                out.push(ch);
            }
            ' ' if key || i == 0 => out.push_str("\\ "),
            c => out.push(c),
        }
    }
    out
}

/// The `POST /connectors` body: the configuration without the keys a fleet's worker owns.
pub fn fleet_json(c: &Connector) -> serde_json::Value {
    let config: serde_json::Map<String, serde_json::Value> =
        c.config.iter().filter(|(k, _)| !fleet_owned(k)).map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone()))).collect();
    serde_json::json!({ "name": c.name, "config": config })
}

/// Replaces every literal of `secrets` (at least 4 characters) in `text`.
pub fn scrub(text: &str, secrets: &[String]) -> String {
    let mut out = text.to_string();
    for s in secrets.iter().filter(|s| s.chars().count() >= 4) {
        out = out.replace(s.as_str(), "[redacted]");
    }
    out
}

/// Writes every connector's two files and the reports into `dir`; answers the paths written.
pub fn write_all(dir: &Path, connectors: &[Connector], report_md: &str, report_json: &str, secrets: &[String]) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut written = Vec::new();
    let mut put = |name: String, text: String| -> Result<()> {
        let path = dir.join(name);
        std::fs::write(&path, scrub(&text, secrets)).with_context(|| format!("writing {}", path.display()))?;
        written.push(path);
        Ok(())
    };
    for c in connectors {
        let file = c.name.chars().map(|ch| if ch.is_ascii_alphanumeric() || "._-".contains(ch) { ch } else { '_' }).collect::<String>();
        put(format!("{file}.properties"), properties(c))?;
        put(format!("{file}.json"), format!("{:#}\n", fleet_json(c)))?;
    }
    put("migration-report.md".into(), report_md.to_string())?;
    put("migration-report.json".into(), report_json.to_string())?;
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_escapes_and_scrubbing() {
        assert_eq!(env_name("servicenow-incidents", "snow.auth.password"), "SNOW_SERVICENOW_INCIDENTS_AUTH_PASSWORD");
        assert_eq!(env_name("x", "kafka.sasl.password"), "SNOW_X_KAFKA_SASL_PASSWORD");
        assert_eq!(escape(" a=b\\c", false), "\\ a=b\\\\c");
        assert_eq!(escape("a:b", true), "a\\:b");
        assert_eq!(scrub("user=hunter22 pw=hunter22 x=ab", &["hunter22".into(), "ab".into()]), "user=[redacted] pw=[redacted] x=ab");
        assert!(fleet_owned("kafka.sasl.password") && fleet_owned("component.trusted.keys") && !fleet_owned("component.path"));
    }

    #[test]
    fn a_properties_file_reads_back_as_written() {
        let c = Connector {
            name: "n".into(),
            kind: "source",
            from: vec![],
            rows: vec![],
            apart: vec![],
            config: [("a.b", " lead"), ("c", "x=y:z\\w"), ("d", "new\nline")].iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            env: vec![],
            deployment: vec![],
            problems: vec![],
        };
        let back = snow_runtime::config::parse_properties(&properties(&c)).unwrap();
        assert_eq!(back, c.config);
    }
}
