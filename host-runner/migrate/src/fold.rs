//! Folding: Confluent's sources read one table each, ours any number. Translated sources that
//! agree on everything but their tables (the instance, credentials, converters, Kafka settings,
//! the instance-wide HTTP and retry settings) become one connector with a `snow.table.<t>.*`
//! group per old connector; anything that differs keeps them apart, and [`Group::apart`] says
//! which key did.

use std::collections::BTreeMap;

use super::translate::{Setting, Translation};

/// One connector of ours: one or more old connectors.
#[derive(Clone, Debug)]
pub struct Group {
    /// The old connectors, translated.
    pub members: Vec<Translation>,
    /// Sources on the same instance this one was not folded into: (their old name, the keys that
    /// differ).
    pub apart: Vec<(String, Vec<String>)>,
}

impl Group {
    /// True for a sink (never folded).
    pub fn is_sink(&self) -> bool {
        self.members[0].old.product.is_sink()
    }

    /// The merged configuration (members' tables side by side).
    pub fn config(&self) -> BTreeMap<String, Setting> {
        let mut config = self.members[0].config.clone();
        let mut tables: Vec<String> = Vec::new();
        let mut tasks = 1u32;
        for m in &self.members {
            for (k, v) in &m.config {
                if k == "snow.tables" {
                    if let Setting::Text(list) = v {
                        tables.extend(list.split(',').filter(|t| !t.is_empty()).map(String::from));
                    }
                } else {
                    config.entry(k.clone()).or_insert_with(|| v.clone());
                }
            }
            tasks = tasks.max(m.old.entries.get("tasks.max").and_then(|t| t.trim().parse().ok()).unwrap_or(1));
        }
        if !self.is_sink() {
            config.insert("snow.tables".into(), Setting::Text(tables.join(",")));
            if self.members.len() > 1 {
                config.insert("tasks.max".into(), Setting::Text(tasks.to_string()));
            }
        }
        config
    }
}

/// The keys that say where and how a source reads, apart from its tables.
fn shared(t: &Translation) -> BTreeMap<&str, &Setting> {
    t.config.iter().filter(|(k, _)| !is_per_table(k)).map(|(k, v)| (k.as_str(), v)).collect()
}

fn is_per_table(key: &str) -> bool {
    key == "snow.tables" || key.starts_with("snow.table.") || key == "tasks.max" || key == "name"
}

fn tables(t: &Translation) -> Vec<&str> {
    match t.config.get("snow.tables") {
        Some(Setting::Text(list)) => list.split(',').filter(|s| !s.is_empty()).collect(),
        _ => Vec::new(),
    }
}

/// The keys whose values differ between two shared parts.
fn differing(a: &BTreeMap<&str, &Setting>, b: &BTreeMap<&str, &Setting>) -> Vec<String> {
    let keys: std::collections::BTreeSet<&&str> = a.keys().chain(b.keys()).collect();
    keys.into_iter().filter(|k| a.get(**k) != b.get(**k)).map(|k| k.to_string()).collect()
}

/// Groups `translations` (in order): sinks alone, sources folded where they agree.
pub fn fold(translations: Vec<Translation>) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::new();
    for t in translations {
        if t.old.product.is_sink() {
            groups.push(Group { members: vec![t], apart: Vec::new() });
            continue;
        }
        let mut near: Option<(String, Vec<String>)> = None;
        let mut home = None;
        for (i, g) in groups.iter().enumerate().filter(|(_, g)| !g.is_sink()) {
            let first = &g.members[0];
            let diff = differing(&shared(first), &shared(&t));
            let clash: Vec<&str> = g.members.iter().flat_map(tables).filter(|x| tables(&t).contains(x)).collect();
            if diff.is_empty() && clash.is_empty() {
                home = Some(i);
                break;
            }
            if near.is_none() && first.config.get("snow.instance.url") == t.config.get("snow.instance.url") {
                let mut why = diff;
                why.extend(clash.iter().map(|c| format!("snow.tables (both read {c})")));
                near = Some((first.old.name.clone(), why));
            }
        }
        match home {
            Some(i) => groups[i].members.push(t),
            None => {
                let mut g = Group { members: vec![], apart: Vec::new() };
                if let Some(apart) = near {
                    g.apart.push(apart);
                }
                g.members.push(t);
                groups.push(g);
            }
        }
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::OldConnector;
    use crate::translate::translate;
    use crate::{Options, Product};

    fn source(name: &str, table: &str, user: &str) -> Translation {
        let entries = [
            ("name", name),
            ("connector.class", "io.confluent.connect.servicenow.ServiceNowSourceConnector"),
            ("servicenow.url", "https://dev1.service-now.com"),
            ("servicenow.table", table),
            ("servicenow.user", user),
            ("servicenow.password", "pw"),
            ("kafka.topic", &format!("t-{table}")),
        ];
        let entries = entries.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        translate(&OldConnector { file: "f".into(), name: name.into(), product: Product::PlatformSource, entries }, &Options::default())
    }

    #[test]
    fn sources_that_agree_fold_and_the_others_say_why_not() {
        let groups = fold(vec![source("a", "incident", "u"), source("b", "problem", "u"), source("c", "change_request", "other")]);
        assert_eq!(groups.len(), 2);
        let config = groups[0].config();
        assert_eq!(config["snow.tables"], Setting::Text("incident,problem".into()));
        assert_eq!(config["snow.table.problem.topic"], Setting::Text("t-problem".into()));
        assert_eq!(groups[1].apart, [("a".to_string(), vec!["snow.auth.username".to_string()])]);
    }

    #[test]
    fn two_connectors_on_one_table_stay_apart() {
        let groups = fold(vec![source("a", "incident", "u"), source("b", "incident", "u")]);
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[1].apart[0].1, ["snow.tables (both read incident)"]);
    }
}
