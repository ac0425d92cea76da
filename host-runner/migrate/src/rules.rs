//! The shape of a translation rule: one row per source key (exact, a `prefix.*` family, or V2's
//! `table{i}.<key>`), saying what becomes of it and citing the research that says what the key
//! means (`docs/research/confluent-servicenow-keys.md`). The rows themselves live in
//! [`super::tables`], one table per product; applying them is [`super::translate`]'s.

use std::collections::BTreeMap;

use super::Product;

/// How a key ends up in the report. `Translated` and `NotNeeded` leave a migration clean;
/// `Review` translates with a change of meaning the reader must accept; `Manual` is a key this
/// runtime cannot express, with what to do instead.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// Translated into our keys.
    Translated,
    /// Not needed here (the note says why).
    NotNeeded,
    /// Translated with a change of meaning.
    Review,
    /// Not expressible here (the note says what to do instead).
    Manual,
}

impl Class {
    /// The word the report and the documentation use.
    pub fn label(self) -> &'static str {
        match self {
            Class::Translated => "translated",
            Class::NotNeeded => "not needed",
            Class::Review => "REVIEW",
            Class::Manual => "MANUAL",
        }
    }
}

/// What becomes of a key. `<t>` in a key of ours stands for the table the old key applied to.
#[derive(Clone, Copy)]
pub enum How {
    /// Read here as Kafka Connect reads it: passes through under its own name.
    Same,
    /// The same value under our key.
    Rename(&'static str),
    /// A value computed by `with`; `to` names what it becomes (for the documentation), `class` is
    /// the usual outcome (`with` may answer otherwise for some values).
    Convert {
        /// What it becomes, for the documentation.
        to: &'static str,
        /// The usual outcome.
        class: Class,
        /// The conversion.
        with: Conversion,
    },
    /// Translated under our key with a change of meaning (the rule's note says which).
    RenameReview(&'static str),
    /// Nothing of ours expresses it: the note says what to do instead.
    Manual,
    /// Not needed here: the note says why.
    Drop,
}

/// A conversion of one value.
pub type Conversion = fn(&Context<'_>, &str) -> Converted;

/// What a conversion made of a value.
pub enum Converted {
    /// Our keys and values; the rule's class applies.
    Keys(Vec<(String, String)>),
    /// Our keys and values, with a change of meaning (why).
    Review(Vec<(String, String)>, String),
    /// Not expressible here (what to do instead).
    Manual(String),
    /// Not needed for this value (why).
    NotNeeded(String),
}

/// One row of a product's table.
pub struct KeyRule {
    /// `servicenow.table`, `confluent.topic.*` (a prefix), or `table{i}.batch.size` (V2's tables).
    pub key: &'static str,
    /// What becomes of it.
    pub how: How,
    /// How it is converted, why it needs review, what to do instead, or why it is not needed.
    pub note: &'static str,
    /// The research's evidence tag(s) for what the key means.
    pub evidence: &'static str,
}

impl KeyRule {
    /// The usual class of this rule, as the documentation shows it.
    pub fn class(&self) -> Class {
        match self.how {
            How::Same | How::Rename(_) => Class::Translated,
            How::Convert { class, .. } => class,
            How::RenameReview(_) => Class::Review,
            How::Manual => Class::Manual,
            How::Drop => Class::NotNeeded,
        }
    }

    /// What the key becomes, for the documentation.
    pub fn target(&self) -> &'static str {
        match self.how {
            How::Same => "(same key)",
            How::Rename(to) | How::RenameReview(to) | How::Convert { to, .. } => to,
            How::Manual | How::Drop => "—",
        }
    }

    /// True when this row covers `key` (with V2's table number already taken out as `{i}`).
    fn covers(&self, key: &str) -> bool {
        match self.key.strip_suffix('*') {
            Some(prefix) => key.starts_with(prefix),
            None => self.key == key,
        }
    }
}

/// The exact row for `key` in `table`.
pub fn find_exact<'t>(table: &'t [KeyRule], key: &str) -> Option<&'t KeyRule> {
    table.iter().find(|r| !r.key.ends_with('*') && r.covers(key))
}

/// The longest prefix row covering `key` in `table`.
pub fn find_prefix<'t>(table: &'t [KeyRule], key: &str) -> Option<&'t KeyRule> {
    table.iter().filter(|r| r.key.ends_with('*') && r.covers(key)).max_by_key(|r| r.key.len())
}

/// What a conversion may look at besides the value.
pub struct Context<'a> {
    /// The product the configuration was written for.
    pub product: Product,
    /// The old key (for a prefix row, the whole key).
    pub key: &'a str,
    /// What a pattern row's placeholder stood for: V2's table number, the open connector's
    /// table alias, or a sink's topic.
    pub part: Option<&'a str>,
    /// The old connector's name.
    pub name: &'a str,
    /// The table the key applies to (`servicenow.table`, or V2's `table{i}.name`).
    pub table: Option<&'a str>,
    /// Every key of the old configuration, as written.
    pub entries: &'a BTreeMap<String, String>,
    /// The translation's options.
    pub options: &'a super::Options,
}

impl Context<'_> {
    /// `to` with `<t>` replaced by the table.
    pub fn ours(&self, to: &str) -> String {
        to.replace("<t>", self.table.unwrap_or("<table>"))
    }
}

/// True for keys whose values are credentials: never copied into an output or a report (a
/// literal becomes an `${env:…}` placeholder; a provider reference is kept as written). Broad on
/// purpose: a key wrongly taken for a secret costs a placeholder, the other way round a leak.
pub fn is_secret_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    [
        "password",
        "secret",
        "jaas.config",
        "user.info",
        "bearer.auth.token",
        "license",
        "api.key",
        "keystorefile",
        "truststorefile",
        "client.headers",
    ]
    .iter()
    .any(|s| key.contains(s))
}

/// True when `value` is a config provider reference (`${provider:…}`), kept as written.
pub fn is_reference(value: &str) -> bool {
    // `${provider:…}`; Confluent's `${connector}` (the connector's name) is not one.
    value.match_indices("${").any(|(i, _)| {
        let rest = &value[i + 2..];
        let name_end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-')).unwrap_or(rest.len());
        name_end > 0 && rest[name_end..].starts_with(':') && rest[name_end..].contains('}')
    })
}

/// The providers this runtime resolves (docs/configuration.md, *Providers and secrets*).
pub fn resolvable_reference(value: &str) -> bool {
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        let inner = &rest[start + 2..];
        if !(inner.starts_with("env:") || inner.starts_with("file:")) {
            return false;
        }
        rest = inner;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &[KeyRule] = &[
        KeyRule { key: "a.b", how: How::Same, note: "", evidence: "" },
        KeyRule { key: "a.*", how: How::Drop, note: "", evidence: "" },
        KeyRule { key: "a.b.*", how: How::Manual, note: "", evidence: "" },
    ];

    #[test]
    fn exact_rows_and_the_longest_prefix() {
        assert!(matches!(find_exact(TABLE, "a.b").unwrap().how, How::Same));
        assert!(matches!(find_prefix(TABLE, "a.b.c").unwrap().how, How::Manual));
        assert!(matches!(find_prefix(TABLE, "a.c").unwrap().how, How::Drop));
        assert!(find_exact(TABLE, "b").is_none() && find_prefix(TABLE, "b").is_none());
    }

    #[test]
    fn secrets_and_references_are_recognised() {
        for k in ["servicenow.password", "oauth2.client.secret", "kafka.api.key", "kafka.api.secret", "confluent.license", "proxy.password"]
        {
            assert!(is_secret_key(k), "{k}");
        }
        for k in ["servicenow.user", "servicenow.url", "kafka.topic", "table1.name", "snow.auth.token.url", "oauth2.token.url"] {
            assert!(!is_secret_key(k), "{k}");
        }
        assert!(is_reference("${file:/etc/s.properties:pw}") && is_reference("x ${env:A} y"));
        assert!(!is_reference("dlq-${connector}") && !is_reference("${:x}") && !is_reference("plain"));
        assert!(resolvable_reference("${env:PW}") && resolvable_reference("u=\"${file:/a:u}\" p=\"${env:P}\""));
        assert!(!resolvable_reference("${vault:secret/sn:pw}"));
    }
}
