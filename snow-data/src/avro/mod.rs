//! Avro as Confluent's `AvroConverter` writes and reads it: [`schema`] maps Connect schemas to
//! Avro's and parses a writer's schema; [`encode`] writes a Connect value in Avro's binary
//! encoding under the schema `schema::from_connect` gave; [`decode`] reads one under a parsed
//! writer's schema. Framing with the registry id is [`crate::wire`]'s.

pub mod decode;
pub mod encode;
pub mod schema;

pub use decode::decode;
pub use encode::encode;
pub use schema::{Node, from_connect, parse};
