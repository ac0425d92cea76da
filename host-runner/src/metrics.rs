//! An in-process metrics registry: counters and gauges keyed by name and labels. Guests report
//! through the `host` interface; the host's own code calls it directly. Label values are redacted.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

type Key = (String, Vec<(String, String)>);

/// A shared registry; clones see the same values.
#[derive(Clone, Default, Debug)]
pub struct Metrics {
    values: Arc<Mutex<BTreeMap<Key, f64>>>,
}

fn key(name: &str, labels: &[(String, String)]) -> Key {
    let mut labels: Vec<(String, String)> = labels.iter().map(|(k, v)| (k.clone(), snow_core::redact::redact(v))).collect();
    labels.sort();
    (name.to_string(), labels)
}

impl Metrics {
    /// Adds `value` to a counter.
    pub fn counter_add(&self, name: &str, value: u64, labels: &[(String, String)]) {
        *self.values.lock().unwrap_or_else(|e| e.into_inner()).entry(key(name, labels)).or_default() += value as f64;
    }

    /// Sets a gauge.
    pub fn gauge_set(&self, name: &str, value: f64, labels: &[(String, String)]) {
        self.values.lock().unwrap_or_else(|e| e.into_inner()).insert(key(name, labels), value);
    }

    /// The sum of every series of `name` whose labels include all of `filter`.
    pub fn sum(&self, name: &str, filter: &[(&str, &str)]) -> f64 {
        self.values
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|((n, labels), _)| n == name && filter.iter().all(|(fk, fv)| labels.iter().any(|(k, v)| k == fk && v == fv)))
            .map(|(_, v)| v)
            .sum()
    }
}

/// Label pairs from string slices.
pub fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}
