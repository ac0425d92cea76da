//! An in-process metrics registry: counters and gauges keyed by name and labels. Guests report
//! through the `host` interface ([`Metrics::guest_record`]); the host's own code calls it directly.
//! Label values are redacted.
//!
//! What a guest reports is checked: metric and label names must be Prometheus names (so nothing a
//! guest sends can add lines to `/metrics`), and the series the guests of one connector may create
//! are capped at [`GUEST_SERIES_PER_CONNECTOR`]; beyond it new series are dropped and counted in
//! `snow_guest_metric_series_dropped_total`.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

type Key = (String, Vec<(String, String)>);

/// Most series the guests of one connector may create (a table reports about ten).
pub const GUEST_SERIES_PER_CONNECTOR: usize = 10_000;

/// A shared registry; clones see the same values.
#[derive(Clone, Default, Debug)]
pub struct Metrics {
    values: Arc<Mutex<BTreeMap<Key, f64>>>,
    /// Series created, and reports dropped, by each connector's guests.
    guest_series: Arc<Mutex<HashMap<String, GuestSeries>>>,
}

/// What the guests of one connector created and had dropped.
#[derive(Debug, Default)]
struct GuestSeries {
    created: usize,
    dropped: u64,
}

/// What a guest reports.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum GuestValue {
    /// Add to a counter.
    Add(u64),
    /// Set a gauge.
    Set(f64),
}

/// A Prometheus metric name: `[a-zA-Z_:][a-zA-Z0-9_:]*`, at most 200 characters.
fn is_metric_name(name: &str) -> bool {
    let mut chars = name.chars();
    name.len() <= 200
        && chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// A Prometheus label name: `[a-zA-Z_][a-zA-Z0-9_]*`, at most 100 characters.
fn is_label_name(name: &str) -> bool {
    let mut chars = name.chars();
    name.len() <= 100
        && chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn key(name: &str, labels: &[(String, String)]) -> Key {
    let mut labels: Vec<(String, String)> = labels.iter().map(|(k, v)| (k.clone(), crate::redact::clean(v))).collect();
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

    /// Records what a guest of `connector` reported, if its names are valid and its series fits
    /// under the connector's cap; returns false when it was dropped (and counts the drop).
    pub fn guest_record(&self, connector: &str, name: &str, value: GuestValue, labels: &[(String, String)]) -> bool {
        if !is_metric_name(name) || !labels.iter().all(|(k, _)| is_label_name(k)) || labels.len() > 16 {
            self.guest_dropped(connector, "a metric or label name that is not a Prometheus name");
            return false;
        }
        let key = key(name, labels);
        {
            let mut values = self.values.lock().unwrap_or_else(|e| e.into_inner());
            if !values.contains_key(&key) {
                let mut series = self.guest_series.lock().unwrap_or_else(|e| e.into_inner());
                let mine = series.entry(connector.to_string()).or_default();
                if mine.created >= GUEST_SERIES_PER_CONNECTOR {
                    drop((series, values));
                    self.guest_dropped(connector, "the connector's guests reached their series cap");
                    return false;
                }
                mine.created += 1;
            }
            let slot = values.entry(key).or_default();
            match value {
                GuestValue::Add(n) => *slot += n as f64,
                GuestValue::Set(v) => *slot = v,
            }
        }
        true
    }

    /// Counts a dropped report of `connector`'s guests; logs the first one.
    fn guest_dropped(&self, connector: &str, why: &str) {
        let first = {
            let mut series = self.guest_series.lock().unwrap_or_else(|e| e.into_inner());
            let mine = series.entry(connector.to_string()).or_default();
            mine.dropped += 1;
            mine.dropped == 1
        };
        self.counter_add("snow_guest_metric_series_dropped_total", 1, &labels(&[("connector", connector)]));
        if first {
            tracing::warn!(
                connector,
                "dropped a metric a guest reported: {why} (cap {GUEST_SERIES_PER_CONNECTOR} series per connector); further drops are only counted"
            );
        }
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
    fn guest_series_are_capped_and_names_checked() {
        let m = Metrics::default();
        let l = |i: usize| labels(&[("n", &i.to_string())]);
        for i in 0..GUEST_SERIES_PER_CONNECTOR {
            assert!(m.guest_record("c", "rogue_total", GuestValue::Add(1), &l(i)));
        }
        assert!(!m.guest_record("c", "rogue_total", GuestValue::Add(1), &l(GUEST_SERIES_PER_CONNECTOR)), "a new series past the cap");
        assert!(m.guest_record("c", "rogue_total", GuestValue::Add(1), &l(0)), "an existing series goes on");
        assert!(m.guest_record("d", "rogue_total", GuestValue::Add(1), &l(0)), "another connector has its own cap");
        assert!(!m.guest_record("c", "x 1\nsnow_source_records_total", GuestValue::Set(1.0), &[]), "no line injection");
        assert!(!m.guest_record("d", "ok_total", GuestValue::Set(1.0), &labels(&[("bad name", "v")])));
        assert_eq!(m.sum("snow_guest_metric_series_dropped_total", &[("connector", "c")]), 2.0);
        assert_eq!(m.sum("rogue_total", &[("n", "0")]), 3.0);
    }

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
