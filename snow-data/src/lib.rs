//! Kafka Connect's data model and what turns it into bytes and back, as the host's record
//! pipeline needs it (ADR 0027): [`schema`] and [`value`] are Connect's `Schema` and its values;
//! [`connect_json`] is `JsonConverter`'s format (and the format the source component describes
//! its table in); [`avro`] and [`wire`] are what `AvroConverter` writes, [`json_schema`] what
//! `JsonSchemaConverter` writes, [`protobuf`] what `ProtobufConverter` writes; [`snow_text`] maps
//! ServiceNow's text forms to typed values and back; [`transform`] is Connect's Single Message
//! Transforms and predicates. Everything here is pure: the registry, the
//! producer and the consumer are the host's.

pub mod avro;
pub mod binary_io;
pub mod connect_json;
pub mod decimal;
pub mod error;
pub mod json_schema;
pub mod json_text;
pub mod protobuf;
pub mod schema;
pub mod snow_text;
pub mod transform;
pub mod value;
pub mod wire;

pub use error::DataError;
pub use schema::{Field, Kind, Logical, Schema};
pub use value::Value;
