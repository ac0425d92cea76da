//! Kafka Connect's Single Message Transforms and predicates, as Kafka 4.1.1 runs them
//! (`docs/research/connect-smt-semantics.md` is the behaviour reference, checked against the jars).
//! A [`Record`] is Connect's record: topic, partition, key and value each with its optional
//! schema, timestamp and headers. A [`Chain`] is what a connector's `transforms=` / `predicates=`
//! keys configure ([`config`]); it runs its stages in order, a stage whose predicate does not hold
//! (after `negate`) passing the record on unchanged, and a stage that returns no record (Filter)
//! dropping it. The transforms themselves are grouped by what they touch: [`fields`] (the shape
//! of a key or value), [`cast`], [`timestamp`] (TimestampConverter and TimestampRouter),
//! [`flatten`], [`route`] (RegexRouter, Filter and the predicates) and [`headers`].

pub mod cast;
pub mod config;
pub mod fields;
pub mod flatten;
pub mod headers;
pub mod route;
pub mod support;
pub mod timestamp;

use crate::error::DataError;
use crate::schema::Schema;
use crate::value::Value;

pub use config::{COMPONENT_CLASS, Chain, External, Pending};

/// One header: a key and a value with its optional schema.
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    /// The header's key.
    pub key: String,
    /// Its schema, when it has one.
    pub schema: Option<Schema>,
    /// Its value.
    pub value: Value,
}

/// A Connect record as transforms see it.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// The topic.
    pub topic: String,
    /// The partition, when known.
    pub partition: Option<i32>,
    /// The Kafka offset: a sink record's; `None` for a source record (InsertField's `offset.field`
    /// is for sink records only, as in Connect).
    pub offset: Option<i64>,
    /// The key's schema (`None`: schemaless).
    pub key_schema: Option<Schema>,
    /// The key ([`Value::Null`]: none).
    pub key: Value,
    /// The value's schema (`None`: schemaless).
    pub value_schema: Option<Schema>,
    /// The value ([`Value::Null`]: a tombstone).
    pub value: Value,
    /// The timestamp in ms, when there is one.
    pub timestamp: Option<i64>,
    /// Headers, in order (a key may repeat).
    pub headers: Vec<Header>,
}

/// Which half of a record a `$Key` / `$Value` transform works on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// `$Key`.
    Key,
    /// `$Value`.
    Value,
}

impl Record {
    /// The schema and value of `side`.
    pub fn operating(&self, side: Side) -> (Option<&Schema>, &Value) {
        match side {
            Side::Key => (self.key_schema.as_ref(), &self.key),
            Side::Value => (self.value_schema.as_ref(), &self.value),
        }
    }

    /// The record with `side` replaced.
    pub fn with(mut self, side: Side, schema: Option<Schema>, value: Value) -> Self {
        match side {
            Side::Key => {
                self.key_schema = schema;
                self.key = value;
            }
            Side::Value => {
                self.value_schema = schema;
                self.value = value;
            }
        }
        self
    }
}

/// One transform: a record in, a record out, or none (dropped).
pub trait Transform: Send + Sync {
    /// Transforms `record`.
    fn apply(&self, record: Record) -> Result<Option<Record>, DataError>;
}

/// A predicate a stage runs under.
pub trait Predicate: Send + Sync {
    /// Whether `record` matches.
    fn test(&self, record: &Record) -> bool;
}
