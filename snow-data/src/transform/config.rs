//! A connector's `transforms=` and `predicates=` keys, read as Connect's `ConnectorConfig` reads
//! them: `transforms.<alias>.type` names a class, `transforms.<alias>.predicate` and `.negate` put
//! it under a predicate (`predicates.<alias>.type` and its own keys), everything else under the
//! alias is the transform's own configuration. Each problem names its key.

use std::collections::BTreeMap;

use super::cast::Cast;
use super::fields::{ExtractField, HoistField, InsertField, MaskField, ReplaceField, SetSchemaMetadata, ValueToKey};
use super::flatten::Flatten;
use super::headers::{DropHeaders, HeaderFrom, InsertHeader};
use super::route::{Filter, HasHeaderKey, RecordIsTombstone, RegexRouter, TopicNameMatches};
use super::support::{Conf, split_list};
use super::timestamp::{TimestampConverter, TimestampRouter};
use super::{Predicate, Record, Side, Transform};

const PACKAGE: &str = "org.apache.kafka.connect.transforms.";
const PREDICATES: &str = "org.apache.kafka.connect.transforms.predicates.";

/// The transform classes this runtime has (Connect's names, without the package), each with
/// whether it has `$Key` / `$Value` variants.
pub const TRANSFORMS: [(&str, bool); 16] = [
    ("InsertField", true),
    ("ReplaceField", true),
    ("MaskField", true),
    ("ValueToKey", false),
    ("ExtractField", true),
    ("HoistField", true),
    ("Cast", true),
    ("TimestampConverter", true),
    ("Flatten", true),
    ("RegexRouter", false),
    ("TimestampRouter", false),
    ("Filter", false),
    ("HeaderFrom", true),
    ("InsertHeader", false),
    ("DropHeaders", false),
    ("SetSchemaMetadata", true),
];

/// The predicate classes this runtime has.
pub const PREDICATE_CLASSES: [&str; 3] = ["TopicNameMatches", "HasHeaderKey", "RecordIsTombstone"];

/// True for keys this module reads.
pub fn is_transform_key(key: &str) -> bool {
    ["transforms", "predicates"].iter().any(|p| key == *p || key.strip_prefix(p).is_some_and(|r| r.starts_with('.')))
}

fn build_transform(class: &str, conf: &Conf<'_>) -> Result<Box<dyn Transform>, String> {
    let short = class.strip_prefix(PACKAGE).ok_or_else(|| unknown(class))?;
    let (name, side) = match short.split_once('$') {
        Some((n, "Key")) => (n, Some(Side::Key)),
        Some((n, "Value")) => (n, Some(Side::Value)),
        Some(_) => return Err(unknown(class)),
        None => (short, None),
    };
    let Some((_, sided)) = TRANSFORMS.iter().find(|(n, _)| *n == name) else { return Err(unknown(class)) };
    let side = match (sided, side) {
        (true, Some(s)) => s,
        (false, None) => Side::Value,
        (true, None) => return Err(format!("{class} is abstract: use {class}$Key or {class}$Value")),
        (false, Some(_)) => return Err(unknown(class)),
    };
    Ok(match name {
        "InsertField" => Box::new(InsertField::new(side, conf)?),
        "ReplaceField" => Box::new(ReplaceField::new(side, conf)?),
        "MaskField" => Box::new(MaskField::new(side, conf)?),
        "ValueToKey" => Box::new(ValueToKey::new(conf)?),
        "ExtractField" => Box::new(ExtractField::new(side, conf)?),
        "HoistField" => Box::new(HoistField::new(side, conf)?),
        "Cast" => Box::new(Cast::new(side, conf)?),
        "TimestampConverter" => Box::new(TimestampConverter::new(side, conf)?),
        "Flatten" => Box::new(Flatten::new(side, conf)?),
        "RegexRouter" => Box::new(RegexRouter::new(conf)?),
        "TimestampRouter" => Box::new(TimestampRouter::new(conf)?),
        "Filter" => Box::new(Filter),
        "HeaderFrom" => Box::new(HeaderFrom::new(side, conf)?),
        "InsertHeader" => Box::new(InsertHeader::new(conf)?),
        "DropHeaders" => Box::new(DropHeaders::new(conf)?),
        _ => Box::new(SetSchemaMetadata::new(side, conf)?),
    })
}

fn build_predicate(class: &str, conf: &Conf<'_>) -> Result<Box<dyn Predicate>, String> {
    match class.strip_prefix(PREDICATES) {
        Some("TopicNameMatches") => Ok(Box::new(TopicNameMatches::new(conf)?)),
        Some("HasHeaderKey") => Ok(Box::new(HasHeaderKey::new(conf)?)),
        Some("RecordIsTombstone") => Ok(Box::new(RecordIsTombstone)),
        _ => Err(format!(
            "{class:?} is not a predicate this runtime has (it has {})",
            PREDICATE_CLASSES.iter().map(|p| format!("{PREDICATES}{p}")).collect::<Vec<_>>().join(", ")
        )),
    }
}

fn unknown(class: &str) -> String {
    let known: Vec<String> =
        TRANSFORMS.iter().map(|(n, sided)| if *sided { format!("{PACKAGE}{n}$Key/$Value") } else { format!("{PACKAGE}{n}") }).collect();
    format!("{class:?} is not a transform this runtime has (it has {})", known.join(", "))
}

/// One configured stage.
struct Stage {
    alias: String,
    class: String,
    transform: Box<dyn Transform>,
    predicate: Option<(Box<dyn Predicate>, bool)>,
}

/// A transform failed: which one, and why (Connect's `TRANSFORMATION` stage).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StageError {
    /// The stage's alias.
    pub alias: String,
    /// Its class.
    pub class: String,
    /// What went wrong.
    pub message: String,
}

impl std::fmt::Display for StageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "transform {} ({}) failed: {}", self.alias, self.class, self.message)
    }
}

/// A connector's transformation chain.
#[derive(Default)]
pub struct Chain {
    stages: Vec<Stage>,
}

impl std::fmt::Debug for Chain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.stages.iter().map(|s| format!("{} ({})", s.alias, s.class))).finish()
    }
}

impl Chain {
    /// Reads `transforms` / `predicates` from a connector's `entries`; problems go to `errors`,
    /// each naming its key.
    pub fn from_entries(entries: &BTreeMap<String, String>, errors: &mut Vec<String>) -> Self {
        let aliases = entries.get("transforms").map(|t| split_list(t)).unwrap_or_default();
        let mut seen = Vec::new();
        let mut stages = Vec::new();
        for alias in &aliases {
            if alias.is_empty() || seen.contains(alias) {
                errors.push(format!("transforms: Duplicate alias provided (or an empty one): {:?}", entries["transforms"]));
                continue;
            }
            seen.push(alias.clone());
            let prefix = format!("transforms.{alias}.");
            let own: BTreeMap<String, String> = entries
                .iter()
                .filter_map(|(k, v)| k.strip_prefix(&prefix).map(|rest| (rest.to_string(), v.clone())))
                .filter(|(k, _)| !matches!(k.as_str(), "type" | "predicate" | "negate" | "version"))
                .collect();
            let Some(class) = entries.get(&format!("{prefix}type")).map(|c| c.trim().to_string()) else {
                errors.push(format!("{prefix}type: is required (the transform's class)"));
                continue;
            };
            let transform = match build_transform(&class, &Conf::new(&own)) {
                Ok(t) => t,
                Err(e) => {
                    errors.push(format!("{prefix}type ({class}): {e}"));
                    continue;
                }
            };
            let negate = match entries.get(&format!("{prefix}negate")).map(|n| n.trim()) {
                None => false,
                Some(n) if n.eq_ignore_ascii_case("true") => true,
                Some(n) if n.eq_ignore_ascii_case("false") => false,
                Some(n) => {
                    errors.push(format!("{prefix}negate: must be true or false, got {n:?}"));
                    false
                }
            };
            let predicate = match entries.get(&format!("{prefix}predicate")).map(|p| p.trim().to_string()) {
                None => {
                    if entries.contains_key(&format!("{prefix}negate")) {
                        errors.push(format!(
                            "Config '{prefix}negate' was provided but there is no config '{prefix}predicate' defining a predicate to be negated."
                        ));
                    }
                    None
                }
                Some(p) => {
                    let pprefix = format!("predicates.{p}.");
                    let own: BTreeMap<String, String> = entries
                        .iter()
                        .filter_map(|(k, v)| k.strip_prefix(&pprefix).map(|rest| (rest.to_string(), v.clone())))
                        .filter(|(k, _)| !matches!(k.as_str(), "type" | "version"))
                        .collect();
                    match entries.get(&format!("{pprefix}type")) {
                        None => {
                            errors.push(format!("{prefix}predicate: Unknown configuration '{pprefix}type'"));
                            None
                        }
                        Some(pclass) => match build_predicate(pclass.trim(), &Conf::new(&own)) {
                            Ok(pred) => Some((pred, negate)),
                            Err(e) => {
                                errors.push(format!("{pprefix}type ({}): {e}", pclass.trim()));
                                None
                            }
                        },
                    }
                }
            };
            stages.push(Stage { alias: alias.clone(), class, transform, predicate });
        }
        Self { stages }
    }

    /// True when there is nothing to apply.
    pub fn is_empty(&self) -> bool {
        self.stages.is_empty()
    }

    /// The aliases, in order.
    pub fn aliases(&self) -> Vec<&str> {
        self.stages.iter().map(|s| s.alias.as_str()).collect()
    }

    /// Runs the stages in order on `record`; `None` when one drops it.
    pub fn apply(&self, mut record: Record) -> Result<Option<Record>, StageError> {
        for stage in &self.stages {
            let runs = stage.predicate.as_ref().is_none_or(|(p, negate)| negate ^ p.test(&record));
            if !runs {
                continue;
            }
            match stage.transform.apply(record) {
                Ok(Some(next)) => record = next,
                Ok(None) => return Ok(None),
                Err(e) => {
                    return Err(StageError { alias: stage.alias.clone(), class: stage.class.clone(), message: e.to_string() });
                }
            }
        }
        Ok(Some(record))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{Field, Kind, Schema};
    use crate::transform::Header;
    use crate::value::Value;

    fn chain(pairs: &[(&str, &str)]) -> (Chain, Vec<String>) {
        let entries = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let mut errors = Vec::new();
        (Chain::from_entries(&entries, &mut errors), errors)
    }

    fn record(topic: &str, value: Value, headers: &[&str]) -> Record {
        Record {
            topic: topic.into(),
            partition: Some(0),
            offset: None,
            key_schema: None,
            key: Value::Null,
            value_schema: Some(Schema::record("r", vec![Field::new("a", Schema::new(Kind::String).optional())])),
            value,
            timestamp: Some(1_700_000_000_123),
            headers: headers.iter().map(|h| Header { key: h.to_string(), schema: None, value: Value::Null }).collect(),
        }
    }

    #[test]
    fn stages_run_in_order_under_their_predicates() {
        let (c, errors) = chain(&[
            ("transforms", "route,drop,stamp"),
            ("transforms.route.type", "org.apache.kafka.connect.transforms.RegexRouter"),
            ("transforms.route.regex", "servicenow\\.(.*)"),
            ("transforms.route.replacement", "snow-$1"),
            ("transforms.drop.type", "org.apache.kafka.connect.transforms.Filter"),
            ("transforms.drop.predicate", "internal"),
            ("transforms.stamp.type", "org.apache.kafka.connect.transforms.InsertField$Value"),
            ("transforms.stamp.topic.field", "from_topic"),
            ("transforms.stamp.predicate", "tomb"),
            ("transforms.stamp.negate", "true"),
            ("predicates", "internal,tomb"),
            ("predicates.internal.type", "org.apache.kafka.connect.transforms.predicates.HasHeaderKey"),
            ("predicates.internal.name", "internal"),
            ("predicates.tomb.type", "org.apache.kafka.connect.transforms.predicates.RecordIsTombstone"),
        ]);
        assert!(errors.is_empty(), "{errors:?}");
        let out = c.apply(record("servicenow.incident", Value::Struct(vec![("a".into(), Value::String("x".into()))]), &[])).expect("ok");
        let out = out.expect("kept");
        assert_eq!(out.topic, "snow-incident");
        assert_eq!(out.value.get("from_topic"), Some(&Value::String("snow-incident".into())));
        assert_eq!(c.apply(record("t", Value::Null, &["internal"])).expect("ok"), None, "filtered");
        let tomb = c.apply(record("t", Value::Null, &[])).expect("ok").expect("kept");
        assert_eq!(tomb.value, Value::Null, "the negated predicate skipped InsertField for a tombstone");
    }

    #[test]
    fn problems_name_their_keys() {
        let (_, errors) = chain(&[
            ("transforms", "a,b,c,d"),
            ("transforms.a.type", "org.apache.kafka.connect.transforms.MaskField$Value"),
            ("transforms.b.type", "com.example.Mine"),
            ("transforms.c.type", "org.apache.kafka.connect.transforms.Filter"),
            ("transforms.c.negate", "true"),
            ("transforms.d.type", "org.apache.kafka.connect.transforms.ExtractField"),
        ]);
        let all = errors.join("\n");
        for needle in [
            "transforms.a.type (org.apache.kafka.connect.transforms.MaskField$Value): Missing required configuration \"fields\"",
            "transforms.b.type (com.example.Mine): \"com.example.Mine\" is not a transform",
            "Config 'transforms.c.negate' was provided but there is no config 'transforms.c.predicate'",
            "use org.apache.kafka.connect.transforms.ExtractField$Key or",
        ] {
            assert!(all.contains(needle), "{needle} missing from:\n{all}");
        }
    }

    #[test]
    fn a_failing_transform_is_named() {
        let (c, errors) = chain(&[
            ("transforms", "mask"),
            ("transforms.mask.type", "org.apache.kafka.connect.transforms.MaskField$Value"),
            ("transforms.mask.fields", "a"),
        ]);
        assert!(errors.is_empty(), "{errors:?}");
        let e = c.apply(record("t", Value::Null, &[])).expect_err("null value");
        assert_eq!(e.alias, "mask");
        assert_eq!(e.message, "Only Struct objects supported for [mask fields], found: null");
    }
}
