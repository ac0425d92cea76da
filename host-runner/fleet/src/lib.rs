//! snow-connect's fleet: `snow-connect worker` processes of one group sharing connectors
//! ([`worker`], ADR 0023): state in Kafka topics, work slots by Kafka's group protocol, and Kafka
//! Connect's REST API ([`rest`]) over the herder's vocabulary ([`herder`]). A standalone run
//! serves the same API read-only ([`rest::view::Standalone`]). Everything that runs a connector is
//! the runtime's (snow-runtime).

pub mod herder;
pub mod rest;
pub mod worker;
