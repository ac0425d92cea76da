//! snow-connect's fleet: `snow-connect worker` processes of one group sharing connectors
//! ([`worker`], ADR 0023): state in Kafka topics, work slots by Kafka's group protocol, and Kafka
//! Connect's REST API ([`rest`]), which asks nothing but a [`herder::Herder`]: the fleet's, or a
//! standalone run's, read-only ([`herder::Standalone`]). Everything that runs a connector is the
//! runtime's (snow-runtime).

/// The commit this build was made from (`build.rs`: the checkout's, or `SNOW_COMMIT`), or
/// `unknown`.
pub const COMMIT: &str = env!("SNOW_COMMIT");

pub mod herder;
pub mod rest;
pub mod worker;
