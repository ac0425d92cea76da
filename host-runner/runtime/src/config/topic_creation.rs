//! Kafka Connect's topic creation for source connectors (KIP-158), read as Connect reads it: a
//! source creates the topics it writes to when `topic.creation.default.replication.factor` and
//! `topic.creation.default.partitions` are set (`-1`: the broker's default); `topic.creation.groups`
//! names further groups, each with `include` (required) and `exclude` lists of regular
//! expressions (a topic must match one in full), its own `replication.factor` and `partitions`
//! (else the default group's) and any topic-level setting (`cleanup.policy`, `retention.ms`,
//! `compression.type`...). A topic takes the first listed group that includes and does not exclude
//! it, else the default group. A topic that already exists is left as it is, as in Connect.

use snow_core::error::ConfigError;
use std::collections::BTreeMap;

use regex::Regex;

/// One group's settings.
#[derive(Debug, Clone)]
pub struct Group {
    /// `default` or the group's name.
    pub name: String,
    include: Vec<Regex>,
    exclude: Vec<Regex>,
    /// Partitions (`-1`: the broker's default).
    pub partitions: i32,
    /// Replication factor (`-1`: the broker's default).
    pub replication: i32,
    /// Topic-level settings.
    pub configs: BTreeMap<String, String>,
}

/// A source connector's topic creation settings.
#[derive(Debug, Clone)]
pub struct TopicCreation {
    groups: Vec<Group>,
    default: Group,
}

/// True for the keys this module reads.
pub fn is_topic_creation_key(key: &str) -> bool {
    key.starts_with("topic.creation.")
}

const GROUP_KEYS: [&str; 4] = ["include", "exclude", "partitions", "replication.factor"];

impl TopicCreation {
    /// The settings of `entries`; `None` when the connector does not create topics. Problems go
    /// to `errors`, naming their key.
    pub fn from_entries(entries: &BTreeMap<String, String>, errors: &mut Vec<ConfigError>) -> Option<Self> {
        let get = |k: &str| entries.get(&format!("topic.creation.{k}")).map(|v| v.trim());
        let number = |key: &str, errors: &mut Vec<ConfigError>| -> Option<i32> {
            let v = get(key)?;
            match v.parse::<i32>() {
                Ok(n) if n == -1 || n >= 1 => Some(n),
                _ => {
                    errors.push(ConfigError::new(
                        format!("topic.creation.{key}"),
                        format!("must be -1 (the broker's default) or at least 1, got {v:?}"),
                    ));
                    None
                }
            }
        };
        let any = entries.keys().any(|k| is_topic_creation_key(k));
        let replication = number("default.replication.factor", errors);
        let partitions = number("default.partitions", errors);
        let (Some(replication), Some(partitions)) = (replication, partitions) else {
            if any {
                for key in ["topic.creation.default.replication.factor", "topic.creation.default.partitions"] {
                    errors.push(ConfigError::missing(key, "both are required to create topics (-1 takes the broker's default)"));
                }
            }
            return None;
        };
        let names: Vec<String> =
            get("groups").map(|g| g.split(',').map(str::trim).filter(|g| !g.is_empty()).map(str::to_string).collect()).unwrap_or_default();
        let configs_of = |name: &str| -> BTreeMap<String, String> {
            let prefix = format!("topic.creation.{name}.");
            entries
                .iter()
                .filter_map(|(k, v)| k.strip_prefix(&prefix).map(|rest| (rest.to_string(), v.trim().to_string())))
                .filter(|(k, _)| !GROUP_KEYS.contains(&k.as_str()))
                .collect()
        };
        let patterns = |name: &str, which: &str, errors: &mut Vec<ConfigError>| -> Vec<Regex> {
            get(&format!("{name}.{which}"))
                .map(|list| list.split(',').map(str::trim).filter(|p| !p.is_empty()).collect::<Vec<_>>())
                .unwrap_or_default()
                .into_iter()
                .filter_map(|p| match Regex::new(&format!("^(?:{p})$")) {
                    Ok(r) => Some(r),
                    Err(e) => {
                        errors.push(ConfigError::new(
                            format!("topic.creation.{name}.{which}"),
                            format!("{p:?} is not a regular expression: {e}"),
                        ));
                        None
                    }
                })
                .collect()
        };
        let default = Group {
            name: "default".into(),
            include: vec![Regex::new(".*").expect("a constant pattern")],
            exclude: Vec::new(),
            partitions,
            replication,
            configs: configs_of("default"),
        };
        let mut groups = Vec::new();
        for name in names {
            if name == "default" {
                errors.push(ConfigError::new("topic.creation.groups", "\"default\" is the default group; it is not listed"));
                continue;
            }
            let include = patterns(&name, "include", errors);
            if include.is_empty() {
                errors.push(ConfigError::missing(
                    format!("topic.creation.{name}.include"),
                    format!("is required for group {name} (regular expressions of its topics)"),
                ));
            }
            let exclude = patterns(&name, "exclude", errors);
            groups.push(Group {
                partitions: number(&format!("{name}.partitions"), errors).unwrap_or(default.partitions),
                replication: number(&format!("{name}.replication.factor"), errors).unwrap_or(default.replication),
                configs: configs_of(&name),
                name,
                include,
                exclude,
            });
        }
        Some(Self { groups, default })
    }

    /// The group `topic` is created with.
    pub fn group_of(&self, topic: &str) -> &Group {
        self.groups
            .iter()
            .find(|g| g.include.iter().any(|r| r.is_match(topic)) && !g.exclude.iter().any(|r| r.is_match(topic)))
            .unwrap_or(&self.default)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(pairs: &[(&str, &str)]) -> (Option<TopicCreation>, Vec<String>) {
        let entries = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let mut errors = Vec::new();
        (TopicCreation::from_entries(&entries, &mut errors), snow_core::error::config_lines(&errors))
    }

    #[test]
    fn a_topic_takes_the_first_group_that_includes_it() {
        let (tc, errors) = read(&[
            ("topic.creation.default.replication.factor", "-1"),
            ("topic.creation.default.partitions", "3"),
            ("topic.creation.default.compression.type", "zstd"),
            ("topic.creation.groups", "audit,tasks"),
            ("topic.creation.audit.include", "servicenow\\.sys_audit.*"),
            ("topic.creation.audit.cleanup.policy", "compact"),
            ("topic.creation.audit.partitions", "1"),
            ("topic.creation.tasks.include", "servicenow\\..*"),
            ("topic.creation.tasks.exclude", "servicenow\\.incident"),
        ]);
        assert!(errors.is_empty(), "{errors:?}");
        let tc = tc.expect("enabled");
        let audit = tc.group_of("servicenow.sys_audit");
        assert_eq!((audit.name.as_str(), audit.partitions, audit.replication), ("audit", 1, -1));
        assert_eq!(audit.configs.get("cleanup.policy").map(String::as_str), Some("compact"));
        assert_eq!(tc.group_of("servicenow.task").name, "tasks");
        let incident = tc.group_of("servicenow.incident");
        assert_eq!((incident.name.as_str(), incident.partitions), ("default", 3), "excluded from tasks");
        assert_eq!(incident.configs.get("compression.type").map(String::as_str), Some("zstd"));
    }

    #[test]
    fn problems_name_their_keys() {
        let (tc, errors) = read(&[("topic.creation.default.partitions", "0"), ("topic.creation.groups", "x")]);
        assert!(tc.is_none());
        let all = errors.join("\n");
        assert!(all.contains("topic.creation.default.partitions: must be -1"), "{all}");
        assert!(all.contains("both are required"), "{all}");
        let (_, errors) = read(&[
            ("topic.creation.default.partitions", "1"),
            ("topic.creation.default.replication.factor", "1"),
            ("topic.creation.groups", "x"),
        ]);
        assert!(errors.join("\n").contains("topic.creation.x.include: is required"), "{errors:?}");
    }
}
