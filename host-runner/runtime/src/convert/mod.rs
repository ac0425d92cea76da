//! Kafka Connect's converters in the host's record pipeline (ADR 0027): the keys that choose
//! them ([`spec`]), the schema registry they share ([`registry`], over TLS as [`registry_tls`]
//! reads it), what a source unit does
//! with them ([`source`]), and what a sink reads with them ([`sink`]). The encodings themselves are `snow-data`'s.

pub mod registry;
pub mod registry_tls;
pub mod sink;
pub mod source;
pub mod spec;

use std::sync::Arc;

use registry::Registry;
use spec::ConvertSpec;

/// A connector's converters with their registry clients; cheap to clone (one per unit).
#[derive(Clone, Debug, Default)]
pub struct Converters {
    /// What was configured.
    pub spec: Arc<ConvertSpec>,
    /// The key converter's registry, when it uses one.
    pub key_registry: Option<Registry>,
    /// The value converter's registry, when it uses one.
    pub value_registry: Option<Registry>,
}

impl Converters {
    /// The converters `spec` configures, each registry with its own cache.
    pub fn new(spec: ConvertSpec) -> Self {
        let registry = |c: &Option<spec::ConverterSpec>| {
            c.as_ref()
                .filter(|c| !c.registry_urls.is_empty())
                .map(|c| Registry::new(c.registry_urls.clone(), c.registry_auth.clone(), c.registry_tls.clone()))
        };
        Self { key_registry: registry(&spec.key), value_registry: registry(&spec.value), spec: Arc::new(spec) }
    }
}
