//! Kafka Connect's converters in the host's record pipeline (ADR 0027): the keys that choose
//! them ([`spec`]), the schema registry they share ([`registry`], reached through the connector's
//! proxy with the TLS settings of `*.schema.registry.ssl.*`), what a source unit does
//! with them ([`source`]), and what a sink reads with them ([`sink`]). The encodings themselves are `snow-data`'s.

pub mod registry;
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
    /// The converters `spec` configures, each registry with its own cache, reached through
    /// `proxy` (the connector's) unless its host is on the proxy's no-proxy list.
    pub fn new(spec: ConvertSpec, proxy: Option<Arc<crate::transport::proxy::Proxy>>) -> Self {
        let registry = |c: &Option<spec::ConverterSpec>, prefix: &str| {
            c.as_ref().filter(|c| !c.registry_urls.is_empty()).map(|c| {
                let route = crate::transport::Route {
                    proxy: proxy.clone(),
                    tls: c.registry_tls.clone(),
                    tls_keys: Some(Arc::from(format!("{prefix}.schema.registry.ssl"))),
                };
                Registry::new(c.registry_urls.clone(), c.registry_auth.clone(), route)
            })
        };
        Self {
            key_registry: registry(&spec.key, "key.converter"),
            value_registry: registry(&spec.value, "value.converter"),
            spec: Arc::new(spec),
        }
    }
}
