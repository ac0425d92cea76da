//! The rule tables, one per product (data: [`super::rules::KeyRule`] rows), plus Kafka Connect's
//! own keys shared by all. A product's rows are looked up before the shared ones, so a product
//! can say more about a framework key (a source's `value.converter`).
//!
//! Evidence tags name the sources of `docs/research/confluent-servicenow-keys.md` (Confluent)
//! and `docs/research/open-servicenow-connector-keys.md` (the open connector, `O-*`).

mod confluent_shared;
mod confluent_sink;
mod confluent_source;
mod confluent_v2;
mod framework;
mod open;

use super::Product;
use super::rules::{Class, Conversion, How, KeyRule};

/// The tables that apply to `product`, most specific first.
pub fn for_product(product: Product) -> &'static [&'static [KeyRule]] {
    use confluent_shared::{CLOUD, INSTANCE};
    match product {
        Product::PlatformSource => &[confluent_source::COMMON, INSTANCE, framework::RULES],
        Product::CloudSourceLegacy => &[confluent_source::COMMON, CLOUD, INSTANCE, framework::RULES],
        Product::CloudSourceV2 => &[confluent_v2::RULES, CLOUD, framework::RULES],
        Product::PlatformSink => &[confluent_sink::PLATFORM, confluent_sink::COMMON, INSTANCE, framework::RULES],
        Product::CloudSink => &[confluent_sink::CLOUD, confluent_sink::COMMON, CLOUD, INSTANCE, framework::RULES],
        Product::OpenSource => &[open::SOURCE, open::CORE, framework::RULES],
        Product::OpenSink => &[open::SINK, open::CORE, framework::RULES],
    }
}

/// The row for `key` among `product`'s tables: an exact row first (the most specific table's),
/// then the longest prefix row.
pub fn find(product: Product, key: &str) -> Option<&'static KeyRule> {
    let tables = for_product(product);
    tables.iter().find_map(|t| super::rules::find_exact(t, key)).or_else(|| {
        let mut best: Option<&'static KeyRule> = None;
        for t in tables {
            if let Some(r) = super::rules::find_prefix(t, key)
                && best.is_none_or(|b| r.key.len() > b.key.len())
            {
                best = Some(r);
            }
        }
        best
    })
}

/// Every row that applies to `product` (a row shadowed by a more specific table's left out),
/// for the documentation.
pub fn rows(product: Product) -> Vec<&'static KeyRule> {
    let mut seen = std::collections::BTreeSet::new();
    for_product(product).iter().flat_map(|t| t.iter()).filter(|r| seen.insert(r.key)).collect()
}

/// Kafka Connect's own keys, shared by every product.
pub fn framework_rows() -> &'static [KeyRule] {
    framework::RULES
}

/// Keys a product leaves out whose default differs from ours in a way a user would notice:
/// the translation applies the row to this value as if it had been written.
pub fn implied(product: Product) -> &'static [(&'static str, &'static str)] {
    match product {
        Product::PlatformSource | Product::CloudSourceLegacy => confluent_source::IMPLIED,
        Product::CloudSourceV2 => confluent_v2::IMPLIED,
        Product::CloudSink => confluent_sink::CLOUD_IMPLIED,
        Product::PlatformSink => &[],
        Product::OpenSource => open::SOURCE_IMPLIED,
        Product::OpenSink => open::SINK_IMPLIED,
    }
}

const fn same(key: &'static str, note: &'static str, evidence: &'static str) -> KeyRule {
    KeyRule { key, how: How::Same, note, evidence }
}

const fn rename(key: &'static str, to: &'static str, note: &'static str, evidence: &'static str) -> KeyRule {
    KeyRule { key, how: How::Rename(to), note, evidence }
}

const fn review(key: &'static str, to: &'static str, note: &'static str, evidence: &'static str) -> KeyRule {
    KeyRule { key, how: How::RenameReview(to), note, evidence }
}

const fn convert(key: &'static str, to: &'static str, with: Conversion, note: &'static str, evidence: &'static str) -> KeyRule {
    KeyRule { key, how: How::Convert { to, class: Class::Translated, with }, note, evidence }
}

const fn convert_review(key: &'static str, to: &'static str, with: Conversion, note: &'static str, evidence: &'static str) -> KeyRule {
    KeyRule { key, how: How::Convert { to, class: Class::Review, with }, note, evidence }
}

/// A conversion that decides per value whether the key is needed (`only_default` style).
const fn decide(key: &'static str, with: Conversion, note: &'static str, evidence: &'static str) -> KeyRule {
    KeyRule { key, how: How::Convert { to: "—", class: Class::NotNeeded, with }, note, evidence }
}

const fn manual(key: &'static str, note: &'static str, evidence: &'static str) -> KeyRule {
    KeyRule { key, how: How::Manual, note, evidence }
}

const fn drop(key: &'static str, note: &'static str, evidence: &'static str) -> KeyRule {
    KeyRule { key, how: How::Drop, note, evidence }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_names_each_key_once() {
        for product in Product::ALL {
            for table in for_product(product) {
                let mut keys: Vec<&str> = table.iter().map(|r| r.key).collect();
                keys.sort_unstable();
                let before = keys.len();
                keys.dedup();
                assert_eq!(before, keys.len(), "{product:?}: a table names a key twice");
            }
            for rule in rows(product) {
                assert!(!rule.evidence.is_empty(), "{product:?} {}: no evidence", rule.key);
                assert!(!rule.note.is_empty() || rule.class() == Class::Translated, "{product:?} {}: no note", rule.key);
            }
        }
    }
}
