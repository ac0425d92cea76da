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

    /// Every series in the Prometheus text format (version 0.0.4): names ending in `_total` are
    /// counters, the others gauges.
    pub fn prometheus_text(&self) -> String {
        let values = self.values.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = String::new();
        let mut typed: Option<&str> = None;
        for ((name, labels), value) in values.iter() {
            if typed != Some(name.as_str()) {
                let kind = if name.ends_with("_total") { "counter" } else { "gauge" };
                out.push_str(&format!("# TYPE {name} {kind}\n"));
                typed = Some(name);
            }
            out.push_str(name);
            if !labels.is_empty() {
                let pairs: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{}\"", escape_label(v))).collect();
                out.push_str(&format!("{{{}}}", pairs.join(",")));
            }
            out.push_str(&format!(" {value}\n"));
        }
        out
    }
}

/// A label value escaped for the text format (backslash, double quote, line feed).
fn escape_label(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// Label pairs from string slices.
pub fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_render_in_the_prometheus_text_format() {
        let m = Metrics::default();
        m.counter_add("snow_source_records_total", 5, &labels(&[("table", "incident"), ("connector", "c")]));
        m.counter_add("snow_source_records_total", 2, &labels(&[("table", "x\"y"), ("connector", "c")]));
        m.gauge_set("snow_source_unit_parked", 1.0, &labels(&[("connector", "c"), ("table", "acl")]));
        assert_eq!(
            m.prometheus_text(),
            "# TYPE snow_source_records_total counter\n\
             snow_source_records_total{connector=\"c\",table=\"incident\"} 5\n\
             snow_source_records_total{connector=\"c\",table=\"x\\\"y\"} 2\n\
             # TYPE snow_source_unit_parked gauge\n\
             snow_source_unit_parked{connector=\"c\",table=\"acl\"} 1\n"
        );
    }
}
