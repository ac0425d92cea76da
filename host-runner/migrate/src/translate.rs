//! Applying a product's rules to one old connector, key by key: every key of the file lands in
//! exactly one [`Row`] of the report; the keys of ours it produced go to the [`Translation`]'s
//! configuration, with secrets held apart ([`Setting::Secret`]) so that no output or report can
//! carry them.

use std::collections::BTreeMap;

use super::input::OldConnector;
use super::rules::{self, Class, Context, Converted, How, KeyRule};
use super::{Options, Product, tables};

/// One key's fate, as the report shows it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Row {
    /// The old key (`(not set)` rows: a key the file left out whose default matters).
    pub key: String,
    /// Its value as shown: `(secret)` for a credential, the reference for a provider reference.
    pub value: String,
    /// What became of it.
    pub class: Class,
    /// Our keys it became.
    pub ours: Vec<String>,
    /// How, why, or what to do instead.
    pub note: String,
    /// The research's evidence tags.
    pub evidence: String,
    /// True for a key the file left out (its product's default was translated).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub implied: bool,
}

/// A value of ours: text, or a credential written only as an `${env:…}` placeholder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Setting {
    /// A value written as is (a provider reference included).
    Text(String),
    /// A literal secret of the old configuration.
    Secret(String),
}

/// One old connector, translated.
#[derive(Clone, Debug)]
pub struct Translation {
    /// The old connector.
    pub old: OldConnector,
    /// Our keys.
    pub config: BTreeMap<String, Setting>,
    /// One row per old key (and per implied default).
    pub rows: Vec<Row>,
}

/// Keys that collect values from several old keys (V2's tables, the open sink's topic map).
const LIST_KEYS: [&str; 2] = ["snow.tables", "snow.sink.table.map"];

/// Translates `old` with its product's rules.
pub fn translate(old: &OldConnector, options: &Options) -> Translation {
    let mut t = Translation { old: old.clone(), config: BTreeMap::new(), rows: Vec::new() };
    for (key, value) in &old.entries {
        apply(&mut t, key, value, false, options);
    }
    for (key, value) in tables::implied(old.product) {
        if !old.entries.contains_key(*key) {
            apply(&mut t, key, value, true, options);
        }
    }
    t
}

/// A key as its rule names it (`table{i}.batch.size`, `snow.table.{a}.topic`), what the
/// placeholder stood for, and the table the key applies to; or why the key is not read at all.
fn locate(product: Product, key: &str, entries: &BTreeMap<String, String>) -> Result<(String, Option<String>, Option<String>), String> {
    match product {
        Product::CloudSourceV2 => {
            if let Some((i, rest)) = key.strip_prefix("table").and_then(|r| r.split_once('.')).filter(|(i, _)| i.parse::<u32>().is_ok()) {
                let n: u32 = entries.get("tables.num").and_then(|n| n.trim().parse().ok()).unwrap_or(1);
                if i.parse::<u32>().unwrap_or(0) > n {
                    return Err(format!("table{i} is past tables.num={n}: Confluent ignored it"));
                }
                let table = entries.get(&format!("table{i}.name")).map(|n| n.trim().to_string());
                return Ok((format!("table{{i}}.{rest}"), Some(i.to_string()), table));
            }
            Ok((key.to_string(), None, None))
        }
        Product::OpenSource => {
            if let Some((alias, rest)) = key.strip_prefix("snow.table.").and_then(|r| r.split_once('.')) {
                let aliases: Vec<&str> = entries.get("snow.tables").map(|l| l.split(',').map(str::trim).collect()).unwrap_or_default();
                if !aliases.contains(&alias) {
                    return Err(format!("alias {alias} is not in snow.tables: the open connector ignored it"));
                }
                let table = entries.get(&format!("snow.table.{alias}.name")).map(|n| n.trim().to_string());
                return Ok((format!("snow.table.{{a}}.{rest}"), Some(alias.to_string()), table));
            }
            Ok((key.to_string(), None, None))
        }
        Product::OpenSink => {
            if let Some(topic) = key.strip_prefix("snow.sink.topic.").and_then(|r| r.strip_suffix(".table")) {
                return Ok(("snow.sink.topic.{topic}.table".into(), Some(topic.to_string()), None));
            }
            Ok((key.to_string(), None, None))
        }
        _ => Ok((key.to_string(), None, entries.get("servicenow.table").map(|t| t.trim().to_string()))),
    }
}

fn apply(t: &mut Translation, key: &str, value: &str, implied: bool, options: &Options) {
    let secret = rules::is_secret_key(key);
    let shown = if secret && !rules::is_reference(value) {
        "(secret)".to_string()
    } else if implied && value.is_empty() {
        "(not set)".to_string()
    } else if implied {
        format!("(not set: {value} by default)")
    } else {
        value.to_string()
    };
    let mut row = Row {
        key: key.into(),
        value: shown,
        class: Class::Manual,
        ours: Vec::new(),
        note: String::new(),
        evidence: String::new(),
        implied,
    };
    let product = t.old.product;
    let (rule_key, part, table) = match locate(product, key, &t.old.entries) {
        Ok(found) => found,
        Err(why) => {
            row.class = Class::NotNeeded;
            row.note = why;
            t.rows.push(row);
            return;
        }
    };
    let Some(rule) = tables::find(product, &rule_key) else {
        row.note = format!(
            "not a documented key of the {}: nothing here reads it (check its spelling; docs/migration.md lists the keys)",
            product.title()
        );
        t.rows.push(row);
        return;
    };
    row.evidence = rule.evidence.into();
    let ctx = Context { product, key, part: part.as_deref(), name: &t.old.name, table: table.as_deref(), entries: &t.old.entries, options };
    let converted = if key == "name" {
        Converted::Keys(Vec::new())
    } else if value.trim().is_empty() && !implied {
        Converted::NotNeeded("empty: not in use (our default applies)".into())
    } else if (table.is_none() && rule_needs_table(rule)) && !matches!(rule.how, How::Manual | How::Drop) {
        Converted::Manual(format!("no table to apply it to ({})", table_key(product)))
    } else {
        run(rule, &ctx, value)
    };
    let (keys, class, note) = match converted {
        Converted::Keys(keys) => (keys, rule_class(rule), rule.note.to_string()),
        Converted::Review(keys, why) => (keys, Class::Review, why),
        Converted::Manual(what) => (Vec::new(), Class::Manual, what),
        Converted::NotNeeded(why) => (Vec::new(), Class::NotNeeded, why),
    };
    row.class = class;
    row.note = note;
    // The connector's identity: the name is ours, the class becomes our component and class.
    match key {
        "name" => row.ours.push("name".into()),
        "connector.class" => row.ours.extend(["connector.class".to_string(), "component.path".to_string()]),
        _ => {}
    }
    for (ours, v) in keys {
        row.ours.push(ours.clone());
        // A credential stays one under our key, and so does the old secret carried to another
        // key (Confluent Cloud's API key as the SASL user); constants made beside it do not.
        let secret = rules::is_secret_key(&ours) || (rules::is_secret_key(key) && v == value.trim());
        if let Some(conflict) = set(t, &ours, v, secret) {
            row.class = row.class.max(Class::Review);
            row.note = if row.note.is_empty() { conflict } else { format!("{}; {conflict}", row.note) };
        }
    }
    if rules::is_reference(value) && !rules::resolvable_reference(value) {
        row.class = row.class.max(Class::Review);
        row.note.push_str("; the reference names a config provider this runtime does not have (${env:…} and ${file:…} only): provide the value through one of them");
    }
    t.rows.push(row);
}

fn run(rule: &KeyRule, ctx: &Context<'_>, value: &str) -> Converted {
    match rule.how {
        How::Same => Converted::Keys(vec![(ctx.key.to_string(), value.to_string())]),
        How::Rename(to) => Converted::Keys(vec![(ctx.ours(to), value.to_string())]),
        How::RenameReview(to) => Converted::Review(vec![(ctx.ours(to), value.to_string())], rule.note.to_string()),
        How::Convert { with, .. } => with(ctx, value),
        How::Manual => Converted::Manual(rule.note.to_string()),
        How::Drop => Converted::NotNeeded(rule.note.to_string()),
    }
}

fn rule_class(rule: &KeyRule) -> Class {
    match rule.class() {
        // A conversion that answered keys under a rule whose usual outcome is "not needed"
        // (`decide` rows) translated something.
        Class::NotNeeded => Class::Translated,
        c => c,
    }
}

fn rule_needs_table(rule: &KeyRule) -> bool {
    rule.target().contains("<t>")
}

fn table_key(product: Product) -> &'static str {
    match product {
        Product::CloudSourceV2 => "table{i}.name",
        Product::OpenSource => "snow.table.<alias>.name",
        _ => "servicenow.table",
    }
}

/// Sets our `key`; answers a note when another old key already set it otherwise (the first wins).
fn set(t: &mut Translation, key: &str, value: String, secret: bool) -> Option<String> {
    let setting = if secret && !rules::is_reference(&value) { Setting::Secret(value) } else { Setting::Text(value) };
    if LIST_KEYS.contains(&key) {
        if let Setting::Text(v) = &setting {
            let entry = t.config.entry(key.to_string()).or_insert_with(|| Setting::Text(String::new()));
            if let Setting::Text(list) = entry
                && !list.split(',').any(|x| x == v)
            {
                if !list.is_empty() {
                    list.push(',');
                }
                list.push_str(v);
            }
        }
        return None;
    }
    match t.config.get(key) {
        None => {
            t.config.insert(key.to_string(), setting);
            None
        }
        Some(existing) if *existing == setting => None,
        Some(_) => Some(format!("{key} was already set from another key; that value is kept")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn old(product_class: &str, entries: &[(&str, &str)]) -> OldConnector {
        let mut map: BTreeMap<String, String> = entries.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        map.insert("connector.class".into(), product_class.into());
        map.entry("name".into()).or_insert_with(|| "old".into());
        OldConnector {
            file: "old.json".into(),
            name: map["name"].clone(),
            product: Product::from_class(product_class).unwrap(),
            entries: map,
        }
    }

    fn text(t: &Translation, key: &str) -> Option<String> {
        match t.config.get(key)? {
            Setting::Text(v) => Some(v.clone()),
            Setting::Secret(_) => Some("(secret)".into()),
        }
    }

    #[test]
    fn every_key_lands_in_one_row_and_secrets_are_held_apart() {
        let o = old(
            "io.confluent.connect.servicenow.ServiceNowSourceConnector",
            &[
                ("servicenow.url", "https://dev1.service-now.com/"),
                ("servicenow.table", "incident"),
                ("servicenow.user", "admin"),
                ("servicenow.password", "hunter2"),
                ("kafka.topic", "t-incident"),
                ("batch.max.rows", "500"),
                ("proxy.url", ""),
                ("made.up.key", "1"),
            ],
        );
        let t = translate(&o, &Options::default());
        let written: Vec<&str> = t.rows.iter().filter(|r| !r.implied).map(|r| r.key.as_str()).collect();
        assert_eq!(written, o.entries.keys().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(text(&t, "snow.table.incident.topic").as_deref(), Some("t-incident"));
        assert_eq!(text(&t, "snow.table.incident.batch.size").as_deref(), Some("500"));
        assert_eq!(text(&t, "snow.table.incident.poll.interval.ms").as_deref(), Some("30000"), "Confluent's default kept");
        assert_eq!(text(&t, "snow.instance.url").as_deref(), Some("https://dev1.service-now.com"));
        assert_eq!(t.config["snow.auth.password"], Setting::Secret("hunter2".into()));
        let row = |k: &str| t.rows.iter().find(|r| r.key == k).unwrap();
        assert_eq!(row("servicenow.password").value, "(secret)");
        assert_eq!(row("proxy.url").class, Class::NotNeeded);
        assert_eq!(row("made.up.key").class, Class::Manual);
        assert_eq!(row("connector.class").class, Class::Review);
        assert!(row("servicenow.since").implied && row("servicenow.since").class == Class::Review);
    }

    #[test]
    fn v2_tables_become_ours_and_tables_past_the_count_are_ignored() {
        let o = old(
            "ServiceNowSourceV2",
            &[
                ("tables.num", "2"),
                ("table1.name", "incident"),
                ("table1.topic", "inc"),
                ("table2.name", "problem"),
                ("table2.batch.size", "20000"),
                ("table3.name", "change_request"),
                ("output.data.format", "AVRO"),
            ],
        );
        let t = translate(&o, &Options::default());
        assert_eq!(text(&t, "snow.tables").as_deref(), Some("incident,problem"));
        assert_eq!(text(&t, "snow.table.incident.topic").as_deref(), Some("inc"));
        assert_eq!(text(&t, "snow.table.problem.batch.size").as_deref(), Some("10000"));
        let row = |k: &str| t.rows.iter().find(|r| r.key == k).unwrap();
        assert_eq!(row("table3.name").class, Class::NotNeeded);
        assert_eq!(row("table2.batch.size").class, Class::Review);
        assert_eq!(text(&t, "value.converter").as_deref(), Some("io.confluent.connect.avro.AvroConverter"));
    }

    #[test]
    fn the_open_connectors_aliases_become_tables() {
        let o = old(
            "sh.oso.servicenow.source.ServiceNowSourceConnector",
            &[
                ("snow.url", "https://dev1.service-now.com"),
                ("snow.tables", "t1"),
                ("snow.table.t1.name", "incident"),
                ("snow.table.t1.topic", "inc"),
                ("snow.table.t1.query.domain", "false"),
                ("snow.table.t9.name", "problem"),
                ("snow.source.batch.size", "50000"),
            ],
        );
        let t = translate(&o, &Options::default());
        assert_eq!(text(&t, "snow.tables").as_deref(), Some("incident"));
        assert_eq!(text(&t, "snow.table.incident.topic").as_deref(), Some("inc"));
        assert_eq!(text(&t, "snow.table.incident.query.domain").as_deref(), Some("all"));
        assert_eq!(text(&t, "snow.table.incident.exclude.reference.link").as_deref(), Some("true"));
        assert_eq!(text(&t, "snow.batch.size").as_deref(), Some("10000"));
        assert!(text(&t, "snow.table.problem.topic").is_none());
    }
}
