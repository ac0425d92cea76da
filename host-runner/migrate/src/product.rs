//! The products a configuration can come from, recognised by `connector.class`.

/// The connector a configuration was written for, recognised by its `connector.class`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Product {
    /// ServiceNow Source Connector for Confluent Platform.
    PlatformSource,
    /// ServiceNow Source [Legacy] for Confluent Cloud (the same class underneath).
    CloudSourceLegacy,
    /// ServiceNow Source V2 for Confluent Cloud (Confluent's HTTP source underneath).
    CloudSourceV2,
    /// ServiceNow Sink Connector for Confluent Platform.
    PlatformSink,
    /// ServiceNow Sink for Confluent Cloud.
    CloudSink,
    /// The open Kafka Connect ServiceNow source (`sh.oso.servicenow`).
    OpenSource,
    /// The open Kafka Connect ServiceNow sink.
    OpenSink,
}

impl Product {
    /// Every product, in the documentation's order.
    pub const ALL: [Product; 7] = [
        Product::PlatformSource,
        Product::CloudSourceLegacy,
        Product::CloudSourceV2,
        Product::PlatformSink,
        Product::CloudSink,
        Product::OpenSource,
        Product::OpenSink,
    ];

    /// The product a `connector.class` names.
    pub fn from_class(class: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.class() == class.trim())
    }

    /// The `connector.class` that names it.
    pub fn class(self) -> &'static str {
        match self {
            Product::PlatformSource => "io.confluent.connect.servicenow.ServiceNowSourceConnector",
            Product::CloudSourceLegacy => "ServiceNowSource",
            Product::CloudSourceV2 => "ServiceNowSourceV2",
            Product::PlatformSink => "io.confluent.connect.servicenow.ServiceNowSinkConnector",
            Product::CloudSink => "ServiceNowSink",
            Product::OpenSource => "sh.oso.servicenow.source.ServiceNowSourceConnector",
            Product::OpenSink => "sh.oso.servicenow.sink.ServiceNowSinkConnector",
        }
    }

    /// The name the report and `snow.migrated.from` use.
    pub fn id(self) -> &'static str {
        match self {
            Product::PlatformSource => "confluent-platform-source",
            Product::CloudSourceLegacy => "confluent-cloud-source-legacy",
            Product::CloudSourceV2 => "confluent-cloud-source-v2",
            Product::PlatformSink => "confluent-platform-sink",
            Product::CloudSink => "confluent-cloud-sink",
            Product::OpenSource => "open-source",
            Product::OpenSink => "open-sink",
        }
    }

    /// The product's name as its documentation gives it.
    pub fn title(self) -> &'static str {
        match self {
            Product::PlatformSource => "ServiceNow Source Connector for Confluent Platform",
            Product::CloudSourceLegacy => "ServiceNow Source [Legacy] for Confluent Cloud",
            Product::CloudSourceV2 => "ServiceNow Source V2 for Confluent Cloud",
            Product::PlatformSink => "ServiceNow Sink Connector for Confluent Platform",
            Product::CloudSink => "ServiceNow Sink for Confluent Cloud",
            Product::OpenSource => "open Kafka Connect ServiceNow source",
            Product::OpenSink => "open Kafka Connect ServiceNow sink",
        }
    }

    /// True for the sinks.
    pub fn is_sink(self) -> bool {
        matches!(self, Product::PlatformSink | Product::CloudSink | Product::OpenSink)
    }

    /// True for the sources.
    pub fn is_source(self) -> bool {
        !self.is_sink()
    }

    /// True for Confluent Cloud's (fully managed) connectors.
    pub fn is_cloud(self) -> bool {
        matches!(self, Product::CloudSourceLegacy | Product::CloudSourceV2 | Product::CloudSink)
    }
}
