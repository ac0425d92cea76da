//! The value conversions the rule tables name: units, formats, and the keys one old value
//! becomes. Each is a plain function of the value (and the [`Context`](super::rules::Context)), so the tables stay data;
//! one file per family of keys.

pub mod cloud;
pub mod connect;
pub mod instance;
pub mod network;
pub mod open;
pub mod sink;
pub mod source;

use super::rules::Converted;

pub(super) fn one(key: impl Into<String>, value: impl Into<String>) -> Vec<(String, String)> {
    vec![(key.into(), value.into())]
}

pub(super) fn whole(value: &str) -> Result<u64, Converted> {
    value.trim().parse::<u64>().map_err(|_| Converted::Manual(format!("{value:?} is not a whole number; set our key by hand")))
}

/// A switch whose value here must be `default` to mean nothing; any other is manual.
pub(super) fn only_default(value: &str, default: &[&str], manual: &str) -> Converted {
    let v = value.trim();
    if v.is_empty() || default.iter().any(|d| d.eq_ignore_ascii_case(v)) {
        Converted::NotNeeded(format!("{v:?} is the default, which is how this runtime works"))
    } else {
        Converted::Manual(format!("{v:?}: {manual}"))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use super::{cloud::*, instance::*, source::*};
    use crate::rules::Context;
    use crate::{Options, Product};

    fn with<T>(product: Product, entries: &[(&str, &str)], f: impl FnOnce(&Context<'_>) -> T) -> T {
        let entries: BTreeMap<String, String> = entries.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let options = Options::default();
        f(&Context { product, key: "k", part: None, name: "old", table: Some("incident"), entries: &entries, options: &options })
    }

    fn keys(c: Converted) -> Vec<(String, String)> {
        match c {
            Converted::Keys(k) | Converted::Review(k, _) => k,
            Converted::Manual(m) | Converted::NotNeeded(m) => panic!("no keys: {m}"),
        }
    }

    #[test]
    fn units_and_formats() {
        with(Product::PlatformSource, &[], |c| {
            assert_eq!(keys(since(c, "2024-03-01")), [("snow.table.incident.start.timestamp".into(), "2024-03-01 00:00:00".into())]);
            assert!(matches!(since(c, "01/03/2024"), Converted::Manual(_)));
            assert!(matches!(since(c, "2024-13-01"), Converted::Manual(_)));
            assert_eq!(keys(poll_seconds(c, "30")), [("snow.table.incident.poll.interval.ms".into(), "30000".into())]);
            assert_eq!(keys(retries_to_attempts(c, "3")), [("snow.retry.max.attempts".into(), "4".into())]);
            assert!(matches!(batch_size(c, "20000"), Converted::Review(..)));
            assert_eq!(
                keys(instance_url(c, "https://dev1.service-now.com//")),
                [("snow.instance.url".into(), "https://dev1.service-now.com".into())]
            );
            assert!(matches!(write_timeout(c, "20000"), Converted::NotNeeded(_)));
        });
    }

    #[test]
    fn a_sink_takes_the_larger_of_its_two_timeouts() {
        with(Product::PlatformSink, &[("read.timeout.ms", "20000"), ("write.timeout.ms", "90000")], |c| {
            assert_eq!(keys(request_timeout(c, "20000")), [("snow.http.request.timeout.ms".into(), "90000".into())]);
            assert!(matches!(write_timeout(c, "90000"), Converted::NotNeeded(_)));
        });
    }

    #[test]
    fn cloud_formats_bring_their_registry() {
        with(Product::CloudSourceLegacy, &[], |c| {
            let k = keys(data_format(c, "AVRO"));
            assert!(k.contains(&("value.converter".into(), "io.confluent.connect.avro.AvroConverter".into())));
            assert!(k.contains(&("value.converter.schema.registry.url".into(), "${env:SNOW_SCHEMA_REGISTRY_URL}".into())));
            let json = keys(data_format(c, "json"));
            assert!(json.contains(&("value.converter.schemas.enable".into(), "false".into())));
            assert!(matches!(data_format(c, "XML"), Converted::Manual(_)));
        });
    }
}
