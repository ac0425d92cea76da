//! Reading the old configurations: Java properties, a flat JSON object (Confluent Cloud's form,
//! `GET /connectors/<name>/config`), `{"name","config"}` (`POST /connectors`), or a JSON array of
//! these; a directory is every `.json` and `.properties` file in it. Each becomes an
//! [`OldConnector`] with its product, or an [`Invalid`] naming the file and why.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::Product;

/// One old connector's configuration.
#[derive(Clone, Debug)]
pub struct OldConnector {
    /// The file it came from.
    pub file: PathBuf,
    /// Its name (`name`, else the file's).
    pub name: String,
    /// What it was written for.
    pub product: Product,
    /// Its keys and values as written (numbers and booleans as their text).
    pub entries: BTreeMap<String, String>,
}

/// Input that cannot be translated (exit code 4).
#[derive(Clone, Debug, serde::Serialize)]
pub struct Invalid {
    /// The file.
    pub file: String,
    /// Why.
    pub reason: String,
}

/// Reads every path (files, or directories of them).
pub fn read(paths: &[PathBuf]) -> (Vec<OldConnector>, Vec<Invalid>) {
    let (mut found, mut invalid) = (Vec::new(), Vec::new());
    for path in paths {
        let files = if path.is_dir() {
            match std::fs::read_dir(path) {
                Ok(dir) => {
                    let mut files: Vec<PathBuf> = dir
                        .filter_map(|e| e.ok().map(|e| e.path()))
                        .filter(|p| p.extension().is_some_and(|e| e == "json" || e == "properties"))
                        .collect();
                    files.sort();
                    files
                }
                Err(e) => {
                    invalid.push(Invalid { file: path.display().to_string(), reason: format!("cannot read the directory: {e}") });
                    continue;
                }
            }
        } else {
            vec![path.clone()]
        };
        for file in files {
            match read_file(&file) {
                Ok(connectors) => found.extend(connectors),
                Err(reason) => invalid.push(Invalid { file: file.display().to_string(), reason }),
            }
        }
    }
    (found, invalid)
}

fn read_file(file: &Path) -> Result<Vec<OldConnector>, String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("cannot read it: {e}"))?;
    let stem = file.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let maps: Vec<(Option<String>, BTreeMap<String, String>)> = if file.extension().is_some_and(|e| e == "json") {
        let value: Value = serde_json::from_str(&text).map_err(|e| format!("not JSON: {e}"))?;
        match value {
            Value::Array(items) => items.iter().enumerate().map(|(i, v)| json_connector(v, &format!("[{i}]"))).collect::<Result<_, _>>()?,
            v => vec![json_connector(&v, "")?],
        }
    } else {
        vec![(None, snow_runtime::config::parse_properties(&text)?)]
    };
    let many = maps.len() > 1;
    maps.into_iter()
        .enumerate()
        .map(|(i, (name, entries))| {
            let name = name
                .or_else(|| entries.get("name").cloned())
                .map(|n| n.trim().to_string())
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| if many { format!("{stem}-{i}") } else { stem.clone() });
            let Some(class) = entries.get("connector.class") else {
                return Err(format!("{name}: no connector.class, so the connector it was written for is unknown"));
            };
            let Some(product) = Product::from_class(class) else {
                return Err(format!(
                    "{name}: connector.class {class:?} is not one of Confluent's ServiceNow connectors or the open one (see docs/migration.md)"
                ));
            };
            let mut entries = entries;
            entries.remove("name");
            entries.insert("name".into(), name.clone());
            Ok(OldConnector { file: file.to_path_buf(), name, product, entries })
        })
        .collect()
}

/// `{"name","config":{…}}` or a flat object of keys.
fn json_connector(value: &Value, at: &str) -> Result<(Option<String>, BTreeMap<String, String>), String> {
    let name = value.get("name").and_then(Value::as_str).map(String::from);
    match value.get("config") {
        Some(config) => Ok((name, snow_runtime::config::string_entries(config, &format!("{at}.config"))?)),
        None => Ok((name, snow_runtime::config::string_entries(value, if at.is_empty() { "the file" } else { at })?)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn every_form_is_read_and_bad_input_is_named() {
        let dir = std::env::temp_dir().join(format!("snow-migrate-input-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        write(
            &dir,
            "a.properties",
            "name=cp\nconnector.class=io.confluent.connect.servicenow.ServiceNowSourceConnector\nbatch.max.rows=10\n",
        );
        write(&dir, "b.json", r#"{"name":"cloud","config":{"connector.class":"ServiceNowSink","tasks.max":2}}"#);
        write(
            &dir,
            "c.json",
            r#"[{"connector.class":"ServiceNowSourceV2","name":"v2"},{"connector.class":"sh.oso.servicenow.sink.ServiceNowSinkConnector"}]"#,
        );
        write(&dir, "d.json", r#"{"connector.class":"io.confluent.connect.jdbc.JdbcSourceConnector"}"#);
        write(&dir, "e.properties", "tasks.max=1\n");
        write(&dir, "ignored.txt", "x");
        let (found, invalid) = read(std::slice::from_ref(&dir));
        let names: Vec<(&str, Product)> = found.iter().map(|c| (c.name.as_str(), c.product)).collect();
        assert_eq!(
            names,
            [("cp", Product::PlatformSource), ("cloud", Product::CloudSink), ("v2", Product::CloudSourceV2), ("c-1", Product::OpenSink)]
        );
        assert_eq!(found[1].entries["tasks.max"], "2");
        assert_eq!(invalid.len(), 2, "{invalid:?}");
        assert!(invalid[0].reason.contains("JdbcSourceConnector") && invalid[1].reason.contains("no connector.class"), "{invalid:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
