//! Sink connector configuration: which table a record goes to, which operation it asks for, how its
//! row is named, and how its value becomes the body ServiceNow receives.
//!
//! `docs/configuration.md` lists every key with its default.

use std::collections::BTreeMap;

use super::instance::InstanceConfig;
use super::reader::{ConfigReader, Entries};
use crate::error::SnowError;
pub use crate::sink::dictionary::UnknownFields;
use crate::sink::guard::{GuardConfig, VersionSource};
use crate::table::query::{is_valid_field_name, is_valid_table_name};

/// Where a record is written: a header naming the table (only from an allow-list), else the table
/// its topic maps to, else one fixed table.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Routing {
    /// `snow.sink.table`.
    pub table: Option<String>,
    /// `snow.sink.table.map`: topic → table.
    pub by_topic: BTreeMap<String, String>,
    /// `snow.sink.table.header` and the tables it may name (`snow.sink.table.header.allowed`).
    pub header: Option<(String, Vec<String>)>,
}

/// The operation a record asks for when no header names one (`snow.sink.operation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OperationMode {
    /// From the record: a tombstone deletes, a record without a sys_id creates, one with a sys_id
    /// updates (by [`UpdateMethod`]).
    Auto,
    /// Always create.
    Create,
    /// Always patch the named row.
    Patch,
    /// Always replace the named row.
    Put,
    /// Always delete the named row.
    Delete,
    /// Update the named row, creating it when it does not exist (or when no row is named).
    Upsert,
}

/// How a record updates an existing row (`snow.sink.update.method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateMethod {
    /// PATCH: the fields given, the rest unchanged.
    Patch,
    /// PUT: the row replaced by the fields given.
    Put,
}

/// Whether a record's key names its row (`snow.sink.sys.id.key`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeySysId {
    /// A key that is a sys_id (text, or a JSON string), or a JSON object with the sys_id field.
    Auto,
    /// Keys never name the row.
    Ignore,
}

/// What a null field value becomes (`snow.sink.null.policy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NullPolicy {
    /// Left out of the body (the field keeps its value).
    Omit,
    /// Sent as `""` (ServiceNow clears the field).
    Clear,
    /// The record fails.
    Reject,
}

/// What a nested object or array value becomes (`snow.sink.nested.policy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NestedPolicy {
    /// The record fails.
    Reject,
    /// Its members become fields of their own, named with the delimiter (`a` → `b` is `a_b`).
    Flatten,
    /// Sent as its JSON text.
    Stringify,
}

/// What a patch, put or delete of a row that does not exist does (`snow.sink.not.found`). A delete
/// of a missing row is a success whatever this says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotFound {
    /// The record fails (not retryable).
    Fail,
    /// The record is skipped and reported as such.
    Ignore,
    /// The row is created instead.
    Create,
}

/// What a create whose outcome is unknown (answered 5xx, or cut off after it was sent) does when
/// the record names no row (`snow.sink.unknown.outcome`). A create that names its row (a sys_id,
/// or one derived from `snow.sink.natural.key.fields`) is looked up by it instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnknownOutcome {
    /// The record fails, reported as ambiguous.
    Fail,
    /// The create is sent again: a possible duplicate, counted.
    Retry,
    /// The row is looked up by `snow.sink.correlation.field` first; sent again only if absent.
    CorrelationLookup,
}

/// How a record's value becomes the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BodyMapping {
    /// `snow.sink.fields.rename`: record field → table field.
    pub rename: BTreeMap<String, String>,
    /// `snow.sink.fields.allow`: when set, only these (table) fields are written.
    pub allow: Option<Vec<String>>,
    /// `snow.sink.fields.deny`: never written.
    pub deny: Vec<String>,
    /// `snow.sink.fields.system.allow`: the `sys_*` fields that may be written (none by default).
    pub system_allow: Vec<String>,
    /// `snow.sink.null.policy`.
    pub null: NullPolicy,
    /// `snow.sink.nested.policy`.
    pub nested: NestedPolicy,
    /// `snow.sink.nested.delimiter`.
    pub delimiter: String,
}

/// The whole sink connector configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SinkConfig {
    /// The instance to write to.
    pub instance: InstanceConfig,
    /// Where records go.
    pub routing: Routing,
    /// `snow.sink.operation`.
    pub operation: OperationMode,
    /// `snow.sink.operation.header`: the header that names a record's operation (none: ignored).
    pub operation_header: Option<String>,
    /// `snow.sink.update.method`.
    pub update: UpdateMethod,
    /// `snow.sink.sys.id.field`: the value member naming the row.
    pub sys_id_field: String,
    /// `snow.sink.sys.id.header`: the header naming the row (none: ignored).
    pub sys_id_header: Option<String>,
    /// `snow.sink.sys.id.key`.
    pub sys_id_key: KeySysId,
    /// `snow.sink.sys.id.key.field`: the member of a key object naming the row (default: the
    /// value's field; Confluent's sink keys name it `sysId`).
    pub sys_id_key_field: String,
    /// How values become bodies.
    pub body: BodyMapping,
    /// `snow.sink.not.found`.
    pub not_found: NotFound,
    /// `snow.sink.unknown.outcome`.
    pub unknown_outcome: UnknownOutcome,
    /// `snow.sink.correlation.field`: the field a `correlation_lookup` finds a created row by.
    pub correlation_field: Option<String>,
    /// `snow.sink.natural.key.fields`: value fields whose values name a new row; a create without
    /// a sys_id gets one derived from them (deterministic creates).
    pub natural_key: Vec<String>,
    /// `snow.sink.halt.on`: the failures after which the rest of a `put` is not attempted, because
    /// the host stops the partition at them (set by the host from its error policies).
    pub halt_on: HaltOn,
    /// The stale-write guard (`snow.sink.version.*`), when a version source is configured.
    pub guard: Option<GuardConfig>,
    /// What the host tells a lane when it opens it (never set by a user):
    /// `snow.sink.takeover.below`, `snow.sink.unknown.through`, `snow.sink.put.budget.ms`.
    pub lane: LaneFacts,
    /// `snow.sink.write.mode`.
    pub write_mode: WriteMode,
    /// `snow.sink.batch.size`: most items in one Batch API request.
    pub batch_size: usize,
    /// `snow.sink.batch.target.ms`: the execution time a batch is sized for.
    pub batch_target_ms: u64,
    /// `snow.sink.unknown.fields`.
    pub unknown_fields: UnknownFields,
    /// `snow.sink.dictionary.ttl.seconds`: how long a table's fields are trusted before read again.
    pub dictionary_ttl: std::time::Duration,
}

/// How writes reach the instance (`snow.sink.write.mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteMode {
    /// One Table API request per write.
    Table,
    /// Writes packed into Batch API requests (`POST /api/now/v1/batch`), falling back to the
    /// Table API when the instance refuses the Batch API.
    Batch,
}

/// What the host knows of a lane's records when it opens it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LaneFacts {
    /// `snow.sink.takeover.below`: records below this offset were there when the lane took its
    /// partition over, so an earlier owner may have written them (its last commit may not have
    /// caught up): under `correlation_lookup`, a create that names no row is looked up first.
    pub takeover_below: Option<i64>,
    /// `snow.sink.unknown.through`: records up to this offset were in a `put` that ended without
    /// outcomes (the component trapped or ran out of time): their creates' outcome is unknown and
    /// is resolved by `snow.sink.unknown.outcome` before anything is sent.
    pub unknown_through: Option<i64>,
    /// `snow.sink.put.budget.ms`: a `put` stops starting writes after this long and returns the
    /// outcomes it has (a prefix); the host hands the rest again at once.
    pub put_budget: Option<std::time::Duration>,
}

/// Which final failures stop a lane's batch (`snow.sink.halt.on`: `record`, `api`, both, or none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HaltOn {
    /// A record the lane could not make a write of (bad value, routing, mapping).
    pub record: bool,
    /// A write ServiceNow refused, or whose outcome stayed unknown.
    pub api: bool,
}

impl HaltOn {
    /// Whether `error`, a final failure, stops the batch.
    pub fn halts(&self, error: &SnowError) -> bool {
        if error.is_record_error() { self.record } else { self.api }
    }
}

/// Records name their operation in this header unless configured otherwise.
fn default_operation_header() -> &'static str {
    "snow.operation"
}

/// Records name their row in this header unless configured otherwise.
fn default_sys_id_header() -> &'static str {
    "snow.sys_id"
}

/// `a.b` cannot be written (ServiceNow reads dots as dot-walking), so flattening joins with `_`.
fn default_delimiter() -> &'static str {
    "_"
}

impl SinkConfig {
    /// Parses and validates a sink configuration; every problem is reported with its key.
    pub fn parse(entries: &Entries) -> Result<Self, SnowError> {
        let mut r = ConfigReader::new(entries);
        let instance = InstanceConfig::read(&mut r);
        let routing = read_routing(&mut r);
        let operation = r.choice(
            "snow.sink.operation",
            OperationMode::Auto,
            &[
                ("auto", OperationMode::Auto),
                ("create", OperationMode::Create),
                ("patch", OperationMode::Patch),
                ("put", OperationMode::Put),
                ("delete", OperationMode::Delete),
                ("upsert", OperationMode::Upsert),
            ],
        );
        let operation_header = header_key(&mut r, "snow.sink.operation.header", default_operation_header());
        let update =
            r.choice("snow.sink.update.method", UpdateMethod::Patch, &[("patch", UpdateMethod::Patch), ("put", UpdateMethod::Put)]);
        let sys_id_field = r.string("snow.sink.sys.id.field").unwrap_or_else(|| "sys_id".into());
        if !is_valid_field_name(&sys_id_field) {
            r.error("snow.sink.sys.id.field", format!("{sys_id_field:?} is not a field name"));
        }
        let sys_id_header = header_key(&mut r, "snow.sink.sys.id.header", default_sys_id_header());
        let sys_id_key = r.choice("snow.sink.sys.id.key", KeySysId::Auto, &[("auto", KeySysId::Auto), ("ignore", KeySysId::Ignore)]);
        let sys_id_key_field = r.string("snow.sink.sys.id.key.field").unwrap_or_else(|| sys_id_field.clone());
        if !is_valid_field_name(&sys_id_key_field) {
            r.error("snow.sink.sys.id.key.field", format!("{sys_id_key_field:?} is not a field name"));
        }
        let body = read_body(&mut r);
        let not_found = r.choice(
            "snow.sink.not.found",
            NotFound::Fail,
            &[("fail", NotFound::Fail), ("ignore", NotFound::Ignore), ("create", NotFound::Create)],
        );
        let unknown_outcome = r.choice(
            "snow.sink.unknown.outcome",
            UnknownOutcome::Fail,
            &[("fail", UnknownOutcome::Fail), ("retry", UnknownOutcome::Retry), ("correlation_lookup", UnknownOutcome::CorrelationLookup)],
        );
        let correlation_field = r.string("snow.sink.correlation.field");
        if let Some(field) = &correlation_field
            && !is_valid_field_name(field)
        {
            r.error("snow.sink.correlation.field", format!("{field:?} is not a field name"));
        }
        if unknown_outcome == UnknownOutcome::CorrelationLookup && correlation_field.is_none() {
            r.error(
                "snow.sink.correlation.field",
                "is required with snow.sink.unknown.outcome=correlation_lookup: the field a created row is found by",
            );
        }
        let natural_key = r.list("snow.sink.natural.key.fields");
        if let Some(bad) = natural_key.iter().find(|f| !is_valid_field_name(f)) {
            r.error("snow.sink.natural.key.fields", format!("{bad:?} is not a field name"));
        }
        let mut halt_on = HaltOn::default();
        for kind in r.list("snow.sink.halt.on") {
            match kind.as_str() {
                "record" => halt_on.record = true,
                "api" => halt_on.api = true,
                other => r.error("snow.sink.halt.on", format!("{other:?} is not record or api")),
            }
        }
        let guard = read_guard(&mut r);
        let lane = LaneFacts {
            takeover_below: r_offset(&mut r, "snow.sink.takeover.below"),
            unknown_through: r_offset(&mut r, "snow.sink.unknown.through"),
            put_budget: r
                .string("snow.sink.put.budget.ms")
                .map(|_| std::time::Duration::from_millis(u64::from(r.bounded_u32("snow.sink.put.budget.ms", 20_000, 100, 3_600_000)))),
        };
        let write_mode = r.choice("snow.sink.write.mode", WriteMode::Table, &[("table", WriteMode::Table), ("batch", WriteMode::Batch)]);
        let batch_size = r.bounded_u32("snow.sink.batch.size", 100, 1, 1000) as usize;
        // A third of the instance's 30 s batch quota by default, so a slow spell still fits.
        let batch_target_ms = u64::from(r.bounded_u32("snow.sink.batch.target.ms", 10_000, 100, 25_000));
        let unknown_fields = r.choice(
            "snow.sink.unknown.fields",
            UnknownFields::Pass,
            &[
                ("pass", UnknownFields::Pass),
                ("fail", UnknownFields::Fail),
                ("drop", UnknownFields::Drop),
                ("report", UnknownFields::Report),
            ],
        );
        let dictionary_ttl = std::time::Duration::from_secs(u64::from(r.bounded_u32("snow.sink.dictionary.ttl.seconds", 300, 1, 86_400)));
        r.finish(&["snow."])?;
        let instance = instance.ok_or_else(|| SnowError::config("snow.instance.url", "is invalid"))?;
        Ok(Self {
            instance,
            routing,
            operation,
            operation_header,
            update,
            sys_id_field,
            sys_id_header,
            sys_id_key,
            sys_id_key_field,
            body,
            not_found,
            unknown_outcome,
            correlation_field,
            natural_key,
            halt_on,
            guard,
            lane,
            write_mode,
            batch_size,
            batch_target_ms,
            unknown_fields,
            dictionary_ttl,
        })
    }
}

/// An offset the host set at `key`, if any.
fn r_offset(r: &mut ConfigReader<'_>, key: &str) -> Option<i64> {
    r.string(key)?;
    Some(r.parse_or(key, i64::MAX, "a Kafka offset"))
}

/// The stale-write guard: at most one version source, and the row field that keeps the newest
/// version written (the version field's own name by default; required with a header or offsets).
fn read_guard(r: &mut ConfigReader<'_>) -> Option<GuardConfig> {
    let field = r.string("snow.sink.version.field");
    let header = r.string("snow.sink.version.header");
    let offset = r.choice("snow.sink.version.offset", false, &[("true", true), ("false", false)]);
    let row_field = r.string("snow.sink.version.row.field");
    let source = match (field, header, offset) {
        (None, None, false) => {
            if row_field.is_some() {
                r.error("snow.sink.version.row.field", "needs a version source: snow.sink.version.field, .header or .offset=true");
            }
            return None;
        }
        (Some(f), None, false) => VersionSource::Field(f),
        (None, Some(h), false) => VersionSource::Header(h),
        (None, None, true) => VersionSource::Offset,
        _ => {
            r.error("snow.sink.version.field", "only one of snow.sink.version.field, .header and .offset=true may be set");
            return None;
        }
    };
    let row_field = match (&source, row_field) {
        (_, Some(f)) => f,
        (VersionSource::Field(f), None) => f.clone(),
        (_, None) => {
            r.error("snow.sink.version.row.field", "is required with a version header or offsets: the row field that keeps the version");
            return None;
        }
    };
    if let VersionSource::Field(f) = &source
        && !is_valid_field_name(f)
    {
        r.error("snow.sink.version.field", format!("{f:?} is not a field name"));
    }
    if !is_valid_field_name(&row_field) || row_field.starts_with("sys_") {
        r.error("snow.sink.version.row.field", format!("{row_field:?} is not a field a record may write"));
        return None;
    }
    Some(GuardConfig { source, row_field })
}

/// A header name under `key`, `default` when absent, none when set to `none`.
fn header_key(r: &mut ConfigReader<'_>, key: &str, default: &str) -> Option<String> {
    match r.string(key) {
        Some(v) if v == "none" => None,
        Some(v) => Some(v),
        None => Some(default.to_string()),
    }
}

/// `a:b,c:d` under `key` as pairs; a malformed pair is an error naming the key.
fn pairs(r: &mut ConfigReader<'_>, key: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for item in r.list(key) {
        match item.split_once(':').map(|(a, b)| (a.trim(), b.trim())) {
            Some((a, b)) if !a.is_empty() && !b.is_empty() => {
                out.insert(a.to_string(), b.to_string());
            }
            _ => r.error(key, format!("{item:?} is not from:to (a comma-separated list of from:to pairs)")),
        }
    }
    out
}

fn read_routing(r: &mut ConfigReader<'_>) -> Routing {
    let table = r.string("snow.sink.table");
    let by_topic = pairs(r, "snow.sink.table.map");
    let header = r.string("snow.sink.table.header").map(|name| {
        let allowed = r.list("snow.sink.table.header.allowed");
        if allowed.is_empty() {
            r.error("snow.sink.table.header.allowed", "is required with snow.sink.table.header: the tables a header may name");
        }
        (name, allowed)
    });
    let check = |r: &mut ConfigReader<'_>, key: &str, t: &str| {
        if !is_valid_table_name(t) {
            r.error(key, format!("{t:?} is not a table name (lower-case letters, digits and _ only)"));
        }
    };
    if let Some(t) = &table {
        check(r, "snow.sink.table", t);
    }
    for t in by_topic.values() {
        check(r, "snow.sink.table.map", t);
    }
    if let Some((_, allowed)) = &header {
        for t in allowed {
            check(r, "snow.sink.table.header.allowed", t);
        }
    }
    if table.is_none() && by_topic.is_empty() && header.is_none() {
        r.error("snow.sink.table", "is required (the table records are written to, e.g. incident), unless snow.sink.table.map or snow.sink.table.header routes them");
    }
    Routing { table, by_topic, header }
}

fn read_body(r: &mut ConfigReader<'_>) -> BodyMapping {
    let rename = pairs(r, "snow.sink.fields.rename");
    if let Some(bad) = rename.values().find(|name| !is_valid_field_name(name) || name.contains('.')) {
        r.error("snow.sink.fields.rename", format!("{bad:?} is not a field name that can be written"));
    }
    let allow = {
        let list = r.list("snow.sink.fields.allow");
        (!list.is_empty()).then_some(list)
    };
    let deny = r.list("snow.sink.fields.deny");
    let system_allow = r.list("snow.sink.fields.system.allow");
    if let Some(bad) = system_allow.iter().find(|f| !f.starts_with("sys_") || *f == "sys_id") {
        r.error("snow.sink.fields.system.allow", format!("{bad:?}: only sys_* fields other than sys_id belong here"));
    }
    let null = r.choice(
        "snow.sink.null.policy",
        NullPolicy::Omit,
        &[("omit", NullPolicy::Omit), ("clear", NullPolicy::Clear), ("reject", NullPolicy::Reject)],
    );
    let nested = r.choice(
        "snow.sink.nested.policy",
        NestedPolicy::Reject,
        &[("reject", NestedPolicy::Reject), ("flatten", NestedPolicy::Flatten), ("stringify", NestedPolicy::Stringify)],
    );
    let delimiter = r.string("snow.sink.nested.delimiter").unwrap_or_else(|| default_delimiter().into());
    if !delimiter.chars().all(|c| c == '_' || c.is_ascii_alphanumeric()) {
        r.error("snow.sink.nested.delimiter", format!("{delimiter:?} would not make field names (letters, digits and _)"));
    }
    BodyMapping { rename, allow, deny, system_allow, null, nested, delimiter }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::reader::entries_from_pairs;

    fn parse(pairs: &[(&str, &str)]) -> Result<SinkConfig, SnowError> {
        let mut all = vec![("snow.instance.url", "https://acme.service-now.com")];
        all.extend_from_slice(pairs);
        SinkConfig::parse(&entries_from_pairs(all).unwrap())
    }

    #[test]
    fn defaults() {
        let c = parse(&[("snow.sink.table", "incident")]).unwrap();
        assert_eq!(c.routing.table.as_deref(), Some("incident"));
        assert_eq!(
            (c.operation, c.update, c.sys_id_key, c.not_found),
            (OperationMode::Auto, UpdateMethod::Patch, KeySysId::Auto, NotFound::Fail)
        );
        assert_eq!((c.operation_header.as_deref(), c.sys_id_header.as_deref()), (Some("snow.operation"), Some("snow.sys_id")));
        assert_eq!((c.body.null, c.body.nested, c.body.delimiter.as_str()), (NullPolicy::Omit, NestedPolicy::Reject, "_"));
    }

    #[test]
    fn routing_and_mapping_keys() {
        let c = parse(&[
            ("snow.sink.table.map", "a:incident, b : change_request"),
            ("snow.sink.table.header", "x-table"),
            ("snow.sink.table.header.allowed", "incident,problem"),
            ("snow.sink.fields.rename", "desc:short_description"),
            ("snow.sink.fields.system.allow", "sys_domain"),
            ("snow.sink.operation.header", "none"),
        ])
        .unwrap();
        assert_eq!(c.routing.by_topic.get("b").map(String::as_str), Some("change_request"));
        assert_eq!(c.routing.header, Some(("x-table".into(), vec!["incident".into(), "problem".into()])));
        assert_eq!(c.body.rename.get("desc").map(String::as_str), Some("short_description"));
        assert_eq!(c.operation_header, None);
    }

    #[test]
    fn every_problem_names_its_key() {
        let err = parse(&[
            ("snow.sink.table.map", "a:Inc/ident,broken"),
            ("snow.sink.table.header", "x-table"),
            ("snow.sink.fields.system.allow", "sys_id,state"),
            ("snow.sink.nested.delimiter", "."),
            ("snow.sink.operation", "merge"),
        ])
        .unwrap_err()
        .to_string();
        for expected in [
            "snow.sink.table.map: \"broken\" is not from:to",
            "snow.sink.table.map: \"Inc/ident\" is not a table name",
            "snow.sink.table.header.allowed: is required",
            "snow.sink.fields.system.allow: \"sys_id\"",
            "snow.sink.nested.delimiter:",
            "snow.sink.operation: must be one of",
        ] {
            assert!(err.contains(expected), "missing {expected:?} in {err}");
        }
        assert!(parse(&[]).unwrap_err().to_string().contains("snow.sink.table: is required"));
    }
}
