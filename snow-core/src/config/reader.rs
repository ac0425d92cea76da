//! Typed reads over configuration entries, collecting errors that name their key.

use std::collections::{BTreeMap, BTreeSet};
use std::str::FromStr;

use crate::error::{ConfigError, SnowError};

/// Configuration entries by key.
pub type Entries = BTreeMap<String, String>;

/// Builds [`Entries`] from key/value pairs; a key given twice is an error naming it.
pub fn entries_from_pairs<I, K, V>(pairs: I) -> Result<Entries, SnowError>
where
    I: IntoIterator<Item = (K, V)>,
    K: Into<String>,
    V: Into<String>,
{
    let mut entries = Entries::new();
    let mut errors = Vec::new();
    for (k, v) in pairs {
        let key = k.into();
        if entries.insert(key.clone(), v.into()).is_some() {
            errors.push(ConfigError::new(key, "given more than once"));
        }
    }
    if errors.is_empty() { Ok(entries) } else { Err(SnowError::Config(errors)) }
}

/// Reads keys from [`Entries`], remembering which were read and every problem met.
pub struct ConfigReader<'a> {
    entries: &'a Entries,
    used: BTreeSet<&'a str>,
    errors: Vec<ConfigError>,
}

impl<'a> ConfigReader<'a> {
    /// A reader over `entries`.
    pub fn new(entries: &'a Entries) -> Self {
        Self { entries, used: BTreeSet::new(), errors: Vec::new() }
    }

    /// The trimmed value of `key`, if present and not empty.
    pub fn string(&mut self, key: &str) -> Option<String> {
        let (k, v) = self.entries.get_key_value(key)?;
        self.used.insert(k.as_str());
        let v = v.trim();
        (!v.is_empty()).then(|| v.to_string())
    }

    /// Counts every key starting with `prefix` as read: keys whose meaning depends on a value that
    /// is already reported wrong (per-table keys when no table is listed) are not also unknown.
    pub fn skip_prefix(&mut self, prefix: &str) {
        for key in self.entries.keys().filter(|k| k.starts_with(prefix)) {
            self.used.insert(key.as_str());
        }
    }

    /// The value of `key`; records `"is required: {hint}"` when absent.
    pub fn required(&mut self, key: &str, hint: &str) -> Option<String> {
        let value = self.string(key);
        if value.is_none() {
            self.errors.push(ConfigError::missing(key, format!("is required: {hint}")));
        }
        value
    }

    /// `key` parsed as `T`, or `default` when absent; a bad value is recorded and `default` returned.
    pub fn parse_or<T: FromStr>(&mut self, key: &str, default: T, what: &str) -> T {
        match self.string(key) {
            None => default,
            Some(text) => text.parse().unwrap_or_else(|_| {
                self.error(key, format!("must be {what}, got {text:?}"));
                default
            }),
        }
    }

    /// An integer `key` within `min..=max`, or `default` when absent.
    pub fn bounded_u32(&mut self, key: &str, default: u32, min: u32, max: u32) -> u32 {
        let value = self.parse_or(key, default, "a whole number");
        if !(min..=max).contains(&value) {
            self.error(key, format!("must be between {min} and {max}, got {value}"));
            return default;
        }
        value
    }

    /// One of the named `options` for `key`, or `default` when absent.
    pub fn choice<T: Copy>(&mut self, key: &str, default: T, options: &[(&str, T)]) -> T {
        let Some(text) = self.string(key) else { return default };
        match options.iter().find(|(name, _)| name.eq_ignore_ascii_case(&text)) {
            Some((_, value)) => *value,
            None => {
                let names: Vec<&str> = options.iter().map(|(n, _)| *n).collect();
                self.error(key, format!("must be one of {}, got {text:?}", names.join(" | ")));
                default
            }
        }
    }

    /// A comma-separated list under `key` (empty items dropped), empty when absent.
    pub fn list(&mut self, key: &str) -> Vec<String> {
        self.string(key).map(|v| v.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect()).unwrap_or_default()
    }

    /// Records a problem with `key`.
    pub fn error(&mut self, key: &str, message: impl Into<String>) {
        self.errors.push(ConfigError::new(key, message));
    }

    /// Ends reading: every key under one of `owned_prefixes` that was never read is reported as
    /// unknown. Returns all problems found.
    pub fn finish(mut self, owned_prefixes: &[&str]) -> Result<(), SnowError> {
        for key in self.entries.keys() {
            if owned_prefixes.iter().any(|p| key.starts_with(p)) && !self.used.contains(key.as_str()) {
                self.errors.push(ConfigError::unknown(key.clone(), "unknown key (check the spelling and docs/configuration.md)"));
            }
        }
        if self.errors.is_empty() { Ok(()) } else { Err(SnowError::Config(self.errors)) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(pairs: &[(&str, &str)]) -> Entries {
        entries_from_pairs(pairs.iter().copied()).unwrap()
    }

    #[test]
    fn collects_every_error_with_its_key() {
        let e = entries(&[("snow.a", "x"), ("snow.b", "99999"), ("snow.typo", "1"), ("other.key", "ignored")]);
        let mut r = ConfigReader::new(&e);
        assert_eq!(r.parse_or("snow.a", 5u32, "a whole number"), 5);
        assert_eq!(r.bounded_u32("snow.b", 10, 1, 100), 10);
        r.required("snow.c", "the instance URL");
        let Err(SnowError::Config(errors)) = r.finish(&["snow."]) else { panic!("expected errors") };
        let keys: Vec<&str> = errors.iter().map(|e| e.key.as_str()).collect();
        assert_eq!(keys, ["snow.a", "snow.b", "snow.c", "snow.typo"]);
        assert!(errors[3].message.contains("unknown key"));
    }

    #[test]
    fn duplicate_keys_are_reported() {
        let err = entries_from_pairs([("k", "1"), ("k", "2")]).unwrap_err();
        assert_eq!(err.to_string(), "invalid configuration: k: given more than once");
    }

    #[test]
    fn choice_lists_the_options() {
        let e = entries(&[("snow.mode", "sideways")]);
        let mut r = ConfigReader::new(&e);
        r.choice("snow.mode", 1, &[("up", 1), ("down", 2)]);
        let err = r.finish(&[]).unwrap_err().to_string();
        assert!(err.contains("must be one of up | down"), "{err}");
    }
}
