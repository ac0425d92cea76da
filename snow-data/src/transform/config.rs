//! A connector's `transforms=` and `predicates=` keys, read as Connect's `ConnectorConfig` reads
//! them: `transforms.<alias>.type` names a class, `transforms.<alias>.predicate` and `.negate` put
//! it under a predicate (`predicates.<alias>.type` and its own keys), everything else under the
//! alias is the transform's own configuration. Each problem names its key.
//!
//! A stage of class [`COMPONENT_CLASS`] is a transform component (docs/transforms.md): this crate
//! only knows its alias and keys; the host loads the component and [`Chain::bind`]s it as an
//! [`External`] stage before the chain runs.

use snow_core::error::ConfigError;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::cast::Cast;
use super::fields::{ExtractField, HoistField, InsertField, MaskField, ReplaceField, SetSchemaMetadata, ValueToKey};
use super::flatten::Flatten;
use super::headers::{DropHeaders, HeaderFrom, InsertHeader};
use super::route::{Filter, HasHeaderKey, RecordIsTombstone, RegexRouter, TopicNameMatches};
use super::support::{Conf, split_list};
use super::timestamp::{TimestampConverter, TimestampRouter};
use super::{Predicate, Record, Side, Transform};

const PACKAGE: &str = "org.apache.kafka.connect.transforms.";
/// The class of a transform component's stage (`transforms.<alias>.type`).
pub const COMPONENT_CLASS: &str = "io.snowconnect.transforms.Component";
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
    let mut known: Vec<String> =
        TRANSFORMS.iter().map(|(n, sided)| if *sided { format!("{PACKAGE}{n}$Key/$Value") } else { format!("{PACKAGE}{n}") }).collect();
    known.push(format!("{COMPONENT_CLASS} (a transform component)"));
    format!("{class:?} is not a transform this runtime has (it has {})", known.join(", "))
}

/// What an [`External`] stage's call returns: the records it made (none drops the record), or
/// why it failed.
pub type Pending<'a> = Pin<Box<dyn Future<Output = Result<Vec<Record>, String>> + Send + 'a>>;

/// A transform that runs outside this crate (a transform component, run by the host): a record
/// in, zero or more records out.
pub trait External: Send + Sync {
    /// Transforms `record`.
    fn apply(&self, record: Record) -> Pending<'_>;
}

/// What a stage runs.
#[derive(Clone)]
enum Runs {
    /// One of Connect's transforms.
    Builtin(Arc<dyn Transform>),
    /// A transform component, once the host bound it.
    External(Option<Arc<dyn External>>),
}

/// One configured stage.
#[derive(Clone)]
struct Stage {
    alias: String,
    class: String,
    runs: Runs,
    /// The stage's own keys (without `transforms.<alias>.`; `type`, `predicate`, `negate` left out).
    own: BTreeMap<String, String>,
    predicate: Option<(Arc<dyn Predicate>, bool)>,
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
#[derive(Default, Clone)]
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
    pub fn from_entries(entries: &BTreeMap<String, String>, errors: &mut Vec<ConfigError>) -> Self {
        let aliases = entries.get("transforms").map(|t| split_list(t)).unwrap_or_default();
        let mut seen = Vec::new();
        let mut stages = Vec::new();
        for alias in &aliases {
            if alias.is_empty() || seen.contains(alias) {
                errors.push(ConfigError::new(
                    "transforms",
                    format!("Duplicate alias provided (or an empty one): {:?}", entries["transforms"]),
                ));
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
                errors.push(ConfigError::missing(format!("{prefix}type"), "is required (the transform's class)"));
                continue;
            };
            let runs = if class == COMPONENT_CLASS {
                Runs::External(None)
            } else {
                match build_transform(&class, &Conf::new(&own)) {
                    Ok(t) => Runs::Builtin(Arc::from(t)),
                    Err(e) => {
                        errors.push(ConfigError::new(format!("{prefix}type"), e.to_string()));
                        continue;
                    }
                }
            };
            let negate = match entries.get(&format!("{prefix}negate")).map(|n| n.trim()) {
                None => false,
                Some(n) if n.eq_ignore_ascii_case("true") => true,
                Some(n) if n.eq_ignore_ascii_case("false") => false,
                Some(n) => {
                    errors.push(ConfigError::new(format!("{prefix}negate"), format!("must be true or false, got {n:?}")));
                    false
                }
            };
            let predicate = match entries.get(&format!("{prefix}predicate")).map(|p| p.trim().to_string()) {
                None => {
                    if entries.contains_key(&format!("{prefix}negate")) {
                        errors.push(ConfigError::new(
                            format!("{prefix}negate"),
                            format!("Config '{prefix}negate' was provided but there is no config '{prefix}predicate' defining a predicate to be negated."),
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
                            errors.push(ConfigError::new(format!("{prefix}predicate"), format!("Unknown configuration '{pprefix}type'")));
                            None
                        }
                        Some(pclass) => match build_predicate(pclass.trim(), &Conf::new(&own)) {
                            Ok(pred) => Some((Arc::from(pred), negate)),
                            Err(e) => {
                                errors.push(ConfigError::new(format!("{pprefix}type"), e.to_string()));
                                None
                            }
                        },
                    }
                }
            };
            stages.push(Stage { alias: alias.clone(), class, runs, own, predicate });
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

    /// The transform components' stages: each alias with its own keys (without
    /// `transforms.<alias>.`), in chain order.
    pub fn components(&self) -> Vec<(&str, &BTreeMap<String, String>)> {
        self.stages.iter().filter(|s| matches!(s.runs, Runs::External(_))).map(|s| (s.alias.as_str(), &s.own)).collect()
    }

    /// The chain with each transform component's stage bound to what `load` gives for its alias.
    pub fn bind(&self, mut load: impl FnMut(&str) -> Arc<dyn External>) -> Self {
        let mut bound = self.clone();
        for stage in &mut bound.stages {
            if let Runs::External(slot) = &mut stage.runs {
                *slot = Some(load(&stage.alias));
            }
        }
        bound
    }

    /// Runs the stages in order on `record`: the records that come out (none when a stage drops
    /// it; a transform component may make several, each going through the stages after it).
    pub async fn apply(&self, record: Record) -> Result<Vec<Record>, StageError> {
        let mut records = vec![record];
        for stage in &self.stages {
            let mut next = Vec::with_capacity(records.len());
            for record in records {
                let runs = stage.predicate.as_ref().is_none_or(|(p, negate)| negate ^ p.test(&record));
                if !runs {
                    next.push(record);
                    continue;
                }
                let failed = |message: String| StageError { alias: stage.alias.clone(), class: stage.class.clone(), message };
                match &stage.runs {
                    Runs::Builtin(t) => next.extend(t.apply(record).map_err(|e| failed(e.to_string()))?),
                    Runs::External(Some(t)) => next.extend(t.apply(record).await.map_err(failed)?),
                    Runs::External(None) => return Err(failed("the transform component is not loaded".into())),
                }
            }
            records = next;
            if records.is_empty() {
                break;
            }
        }
        Ok(records)
    }

    /// [`Chain::apply`] for a chain of Connect's transforms only (no component stage), which
    /// never waits: for callers that are not async. A stage that would wait is an error naming it.
    pub fn apply_now(&self, record: Record) -> Result<Vec<Record>, StageError> {
        let mut running = std::pin::pin!(self.apply(record));
        match running.as_mut().poll(&mut std::task::Context::from_waker(std::task::Waker::noop())) {
            std::task::Poll::Ready(out) => out,
            std::task::Poll::Pending => {
                let stage = self.stages.iter().find(|s| matches!(s.runs, Runs::External(_)));
                Err(StageError {
                    alias: stage.map(|s| s.alias.clone()).unwrap_or_default(),
                    class: COMPONENT_CLASS.into(),
                    message: "a transform component cannot run here".into(),
                })
            }
        }
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
        (Chain::from_entries(&entries, &mut errors), snow_core::error::config_lines(&errors))
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
        let out =
            c.apply_now(record("servicenow.incident", Value::Struct(vec![("a".into(), Value::String("x".into()))]), &[])).expect("ok");
        let out = out.into_iter().next().expect("kept");
        assert_eq!(out.topic, "snow-incident");
        assert_eq!(out.value.get("from_topic"), Some(&Value::String("snow-incident".into())));
        assert_eq!(c.apply_now(record("t", Value::Null, &["internal"])).expect("ok"), vec![], "filtered");
        let tomb = c.apply_now(record("t", Value::Null, &[])).expect("ok").pop().expect("kept");
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
            "transforms.a.type: Missing required configuration \"fields\"",
            "transforms.b.type: \"com.example.Mine\" is not a transform",
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
        let e = c.apply_now(record("t", Value::Null, &[])).expect_err("null value");
        assert_eq!(e.alias, "mask");
        assert_eq!(e.message, "Only Struct objects supported for [mask fields], found: null");
    }

    /// A stand-in for a transform component: splits a record into one per header.
    struct PerHeader;

    impl External for PerHeader {
        fn apply(&self, record: Record) -> Pending<'_> {
            Box::pin(async move {
                if record.headers.iter().any(|h| h.key == "bad") {
                    return Err("a bad header".to_string());
                }
                Ok(record.headers.iter().map(|h| Record { topic: h.key.clone(), headers: Vec::new(), ..record.clone() }).collect())
            })
        }
    }

    #[test]
    fn a_component_stage_runs_once_bound_and_its_records_go_through_the_later_stages() {
        let (c, errors) = chain(&[
            ("transforms", "split,route"),
            ("transforms.split.type", COMPONENT_CLASS),
            ("transforms.split.component.path", "/plugins/split.wasm"),
            ("transforms.split.mode", "headers"),
            ("transforms.route.type", "org.apache.kafka.connect.transforms.RegexRouter"),
            ("transforms.route.regex", "(.*)"),
            ("transforms.route.replacement", "to-$1"),
        ]);
        assert!(errors.is_empty(), "{errors:?}");
        let components = c.components();
        assert_eq!(components.len(), 1);
        assert_eq!(components[0].0, "split");
        assert_eq!(components[0].1.get("mode").map(String::as_str), Some("headers"));
        let e = c.apply_now(record("t", Value::Null, &["a"])).expect_err("not bound");
        assert_eq!((e.alias.as_str(), e.class.as_str()), ("split", COMPONENT_CLASS));
        let bound = c.bind(|alias| {
            assert_eq!(alias, "split");
            std::sync::Arc::new(PerHeader)
        });
        let out = bound.apply_now(record("t", Value::Null, &["a", "b"])).expect("ok");
        assert_eq!(out.iter().map(|r| r.topic.as_str()).collect::<Vec<_>>(), ["to-a", "to-b"]);
        assert_eq!(bound.apply_now(record("t", Value::Null, &[])).expect("ok"), vec![], "no record out: dropped");
        let e = bound.apply_now(record("t", Value::Null, &["bad"])).expect_err("failed");
        assert_eq!(e.to_string(), format!("transform split ({COMPONENT_CLASS}) failed: a bad header"));
    }
}
