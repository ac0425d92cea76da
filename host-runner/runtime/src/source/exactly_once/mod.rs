//! Exactly-once sources (ADR 0030), in one place: the Kafka transactions of one fenced producer
//! that carry a table's records and its new position together ([`transactions`]), and a table's
//! side of it ([`table`]): its own producer or its fleet slot's, fencing at open, and the dedup
//! window read back `read_committed` from its topic. The settings are read with the rest of the
//! configuration (`crate::config::exactly_once`); a fleet slot's producer is the fleet's.

pub mod table;
pub mod transactions;
