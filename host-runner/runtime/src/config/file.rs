//! Reading connector files: `.properties` (one connector, read as Java reads it:
//! [`super::properties`]) or `.json` (`{"name":..,"config":{..}}`, or
//! `{"worker":{..},"connectors":[..]}` whose worker keys apply to every connector).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde_json::Value;

use super::spec::ConnectorSpec;

/// Reads every file and builds its connectors; errors name the file and the key.
pub fn load_files(paths: &[impl AsRef<Path>]) -> Result<Vec<ConnectorSpec>> {
    load_files_with_entries(paths).map(|(specs, _)| specs)
}

/// One connector's entries, as its file wrote them.
pub type Entries = BTreeMap<String, String>;

/// [`load_files`], and each connector's entries as written (provider references unresolved).
pub fn load_files_with_entries(paths: &[impl AsRef<Path>]) -> Result<(Vec<ConnectorSpec>, Vec<Entries>)> {
    build_specs(read_files(paths)?)
}

/// One connector as its file gave it.
#[derive(Debug, Clone)]
pub struct ReadConnector {
    /// The file.
    pub file: PathBuf,
    /// Its entries as written.
    pub written: Entries,
    /// Its entries with provider references resolved: what the connector is built from (a step
    /// between reading and building may rewrite them, as resolving `oci://` components does).
    pub entries: Entries,
}

/// Every connector of every file, not yet built.
pub fn read_files(paths: &[impl AsRef<Path>]) -> Result<Vec<ReadConnector>> {
    let mut read = Vec::new();
    for path in paths {
        let path = path.as_ref();
        for (written, entries) in read_entries(path)? {
            read.push(ReadConnector { file: path.to_path_buf(), written, entries });
        }
    }
    Ok(read)
}

/// Builds the connectors read (errors name the file and the key; a name used twice is refused);
/// returns them with their entries as written.
pub fn build_specs(read: Vec<ReadConnector>) -> Result<(Vec<ConnectorSpec>, Vec<Entries>)> {
    let mut specs = Vec::new();
    let mut written = Vec::new();
    for connector in read {
        written.push(connector.written);
        specs.push(ConnectorSpec::from_entries(connector.entries).with_context(|| format!("in {}", connector.file.display()))?);
    }
    let mut names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    names.sort_unstable();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        bail!("connector name {:?} is used twice", w[0]);
    }
    Ok((specs, written))
}

/// Each connector of the file at `path`: its entries as written, and with provider references
/// resolved (an error names the file and the key).
pub fn read_entries(path: &Path) -> Result<Vec<(Entries, Entries)>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let maps = if path.extension().is_some_and(|e| e == "json") {
        parse_json(&text)
    } else {
        super::properties::parse(&text).map(|map| vec![map]).map_err(anyhow::Error::msg)
    }
    .with_context(|| format!("reading {}", path.display()))?;
    maps.into_iter()
        .map(|written| {
            let mut map = written.clone();
            if let Err(errors) = super::resolve_providers(&mut map) {
                bail!("in {}: {}", path.display(), super::error_lines(&errors).join("; "));
            }
            Ok((written, map))
        })
        .collect()
}

/// A JSON object of key/value strings (numbers and booleans taken as their text), as a
/// connector's configuration; an error names the place (`at`) and the key.
pub fn string_entries(value: &Value, at: &str) -> Result<BTreeMap<String, String>, String> {
    let Some(object) = value.as_object() else { return Err(format!("{at} must be an object of key/value strings")) };
    object
        .iter()
        .map(|(k, v)| match v {
            Value::String(s) => Ok((k.clone(), s.clone())),
            Value::Number(n) => Ok((k.clone(), n.to_string())),
            Value::Bool(b) => Ok((k.clone(), b.to_string())),
            _ => Err(format!("{at}.{k} must be a string, number or boolean")),
        })
        .collect()
}

fn parse_json(text: &str) -> Result<Vec<BTreeMap<String, String>>> {
    let value: Value = serde_json::from_str(text).context("not valid JSON")?;
    let flat = |v: &Value, at: &str| string_entries(v, at).map_err(anyhow::Error::msg);
    let one = |v: &Value, worker: &BTreeMap<String, String>, at: &str| -> Result<BTreeMap<String, String>> {
        let mut map = worker.clone();
        if let Some(config) = v.get("config") {
            map.extend(flat(config, &format!("{at}.config"))?);
            if let Some(name) = v.get("name").and_then(Value::as_str) {
                map.insert("name".into(), name.into());
            }
        } else {
            map.extend(flat(v, at)?);
        }
        Ok(map)
    };
    if let Some(connectors) = value.get("connectors") {
        let worker = match value.get("worker") {
            Some(w) => flat(w, "worker")?,
            None => BTreeMap::new(),
        };
        let Some(list) = connectors.as_array() else { bail!("connectors must be a list") };
        list.iter().enumerate().map(|(i, c)| one(c, &worker, &format!("connectors[{i}]"))).collect()
    } else {
        Ok(vec![one(&value, &BTreeMap::new(), "the file")?])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_and_json_shapes() {
        let j = parse_json(r#"{"worker":{"kafka.bootstrap.servers":"b:1"},"connectors":[{"name":"x","config":{"tasks.max":2}}]}"#).unwrap();
        assert_eq!(j[0].get("kafka.bootstrap.servers").map(String::as_str), Some("b:1"));
        assert_eq!(j[0].get("name").map(String::as_str), Some("x"));
        assert_eq!(j[0].get("tasks.max").map(String::as_str), Some("2"));
        assert!(parse_json(r#"{"name":"x","config":{"a":[1]}}"#).unwrap_err().to_string().contains("the file.config.a"));
    }
}
