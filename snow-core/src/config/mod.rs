//! Connector configuration as the guest receives it: Kafka Connect style key/value strings,
//! validated once into typed structs.
//!
//! [`reader::ConfigReader`] reads keys, applies defaults (named functions with their reason) and
//! collects every problem with the key it is about; unknown `snow.*` keys are reported by name.
//! [`instance`] holds what every connector needs to reach ServiceNow, [`source`] and [`sink`] the
//! rest; [`memory`] checks that a source's settings fit the component's memory. Secrets never appear here: the host resolves and keeps them.

pub mod instance;
pub mod memory;
pub mod reader;
pub mod sink;
pub mod source;

pub use instance::InstanceConfig;
pub use reader::{ConfigReader, Entries};
pub use sink::SinkConfig;
pub use source::{SourceConfig, TableConfig};
