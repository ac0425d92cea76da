//! Where a caller's connector may send requests and credentials ([`DestinationPolicy`], read from
//! a fleet worker's `destinations.*` and `credentials.*` keys).
//!
//! - **Destinations**: the instance (`snow.instance.url`), the token endpoint
//!   (`snow.auth.token.url`, or the instance's own), the schema registries
//!   (`*.converter.schema.registry.url`) and the proxy (`snow.proxy.url`) a caller names must match
//!   the worker's list for their kind when it has one; whatever the lists, a loopback, link-local or
//!   unspecified address (`localhost` included) and the worker's own listeners are refused unless a
//!   list names them. A registry URL with a query is refused.
//! - **Credentials bound to destinations**: when the worker names credentials
//!   (`credentials=team-a,team-b`, each with the references it covers and the destinations it may
//!   go to), a reference in a caller's secret key must be one of a credential's, and every
//!   destination that key's value is sent to must be one of that credential's. So tenant B cannot
//!   pair tenant A's password with a host of B's choosing. Errors name the key and the destination,
//!   never a value.

use std::collections::BTreeMap;
use std::net::IpAddr;

use snow_core::error::ConfigError;

/// The kinds of destination a caller's configuration names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `snow.instance.url`.
    Instance,
    /// The OAuth token endpoint.
    Token,
    /// A schema registry.
    Registry,
    /// The forward proxy.
    Proxy,
}

impl Kind {
    /// The worker key listing the allowed destinations of this kind.
    pub fn list_key(self) -> &'static str {
        match self {
            Kind::Instance => "destinations.instances",
            Kind::Token => "destinations.token.urls",
            Kind::Registry => "destinations.registries",
            Kind::Proxy => "destinations.proxies",
        }
    }
}

/// The worker's keys read here (besides `credentials.<name>.references` and `.destinations`).
pub const KEYS: [&str; 5] =
    ["destinations.instances", "destinations.token.urls", "destinations.registries", "destinations.proxies", "credentials"];

/// Whether `key` is a worker key read here.
pub fn is_key(key: &str) -> bool {
    KEYS.contains(&key)
        || key.strip_prefix("credentials.").is_some_and(|rest| rest.ends_with(".references") || rest.ends_with(".destinations"))
}

/// One entry of a destination list: `[scheme://]host[:port]`, the host possibly `*.domain`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pattern {
    scheme: Option<String>,
    host: String,
    port: Option<u16>,
}

impl Pattern {
    fn parse(text: &str) -> Option<Self> {
        let text = text.trim().trim_end_matches('/');
        let (scheme, rest) = match text.split_once("://") {
            Some((s, r)) => (Some(s.to_ascii_lowercase()), r),
            None => (None, text),
        };
        if rest.is_empty() || rest.contains(['/', '?', '#', '@', ' ']) {
            return None;
        }
        let (host, port) = match rest.rsplit_once(':').filter(|(h, _)| !h.ends_with(':') && (!h.contains(':') || h.ends_with(']'))) {
            Some((h, p)) => (h, Some(p.parse::<u16>().ok()?)),
            None => (rest, None),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
        (!host.is_empty()).then_some(Self { scheme, host, port })
    }

    fn matches(&self, target: &Target) -> bool {
        let host = match self.host.strip_prefix("*.") {
            Some(domain) => target.host.strip_suffix(domain).is_some_and(|head| head.ends_with('.')),
            None => target.host == self.host,
        };
        host && self.scheme.as_ref().is_none_or(|s| *s == target.scheme) && self.port.is_none_or(|p| p == target.port)
    }
}

/// A destination a configuration names.
#[derive(Debug, Clone)]
struct Target {
    scheme: String,
    host: String,
    port: u16,
}

impl Target {
    fn of(url: &str) -> Option<Self> {
        let uri: http::Uri = url.trim().parse().ok()?;
        let scheme = uri.scheme_str().unwrap_or("http").to_ascii_lowercase();
        let authority = uri.authority()?;
        let port = authority.port_u16().unwrap_or(if scheme == "https" { 443 } else { 80 });
        let host = authority.host().trim_start_matches('[').trim_end_matches(']').trim_end_matches('.').to_ascii_lowercase();
        Some(Self { scheme, host, port })
    }

    fn shown(&self) -> String {
        format!("{}://{}:{}", self.scheme, self.host, self.port)
    }

    /// Loopback, link-local or unspecified: a host of the worker's own machine or network.
    fn is_local(&self) -> bool {
        if self.host == "localhost" || self.host.ends_with(".localhost") {
            return true;
        }
        match self.host.parse::<IpAddr>() {
            Ok(IpAddr::V4(a)) => a.is_loopback() || a.is_link_local() || a.is_unspecified(),
            Ok(IpAddr::V6(a)) => {
                a.is_loopback()
                    || a.is_unspecified()
                    || (a.segments()[0] & 0xffc0) == 0xfe80
                    || a.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback() || v4.is_link_local() || v4.is_unspecified())
            }
            Err(_) => false,
        }
    }
}

/// A named credential: the references it covers and where it may be sent.
#[derive(Debug, Clone)]
struct Binding {
    name: String,
    references: Vec<String>,
    destinations: Vec<Pattern>,
}

impl Binding {
    fn covers(&self, reference: &str) -> bool {
        let reference = reference.trim();
        self.references.iter().any(|pattern| match pattern.strip_suffix("*}") {
            Some(prefix) => reference.starts_with(prefix) && reference.ends_with('}'),
            None => pattern == reference,
        })
    }
}

/// What a worker lets a caller's connector reach.
#[derive(Debug, Clone, Default)]
pub struct DestinationPolicy {
    /// Whether the rules apply (a fleet worker's); the default policy checks nothing.
    enforced: bool,
    lists: BTreeMap<&'static str, Vec<Pattern>>,
    /// The worker's own listeners (`host:port`).
    own: Vec<(String, u16)>,
    credentials: Vec<Binding>,
}

impl DestinationPolicy {
    /// The policy of a worker's `entries` (its `destinations.*` and `credentials.*` keys), whose
    /// own listeners are `listeners` (`host:port`); problems go to `errors`, naming the key.
    pub fn read(entries: &BTreeMap<String, String>, listeners: &[&str], errors: &mut Vec<ConfigError>) -> Self {
        let list = |key: &str, errors: &mut Vec<ConfigError>| -> Option<Vec<Pattern>> {
            let value = entries.get(key)?;
            let mut patterns = Vec::new();
            for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
                match Pattern::parse(entry) {
                    Some(p) => patterns.push(p),
                    None => {
                        errors.push(ConfigError::new(key, format!("{entry:?} is not [scheme://]host[:port] (the host may be *.domain)")))
                    }
                }
            }
            Some(patterns)
        };
        let mut lists = BTreeMap::new();
        for kind in [Kind::Instance, Kind::Token, Kind::Registry, Kind::Proxy] {
            if let Some(patterns) = list(kind.list_key(), errors) {
                lists.insert(kind.list_key(), patterns);
            }
        }
        let mut credentials = Vec::new();
        for name in entries
            .get("credentials")
            .map(|v| v.split(',').map(str::trim).filter(|n| !n.is_empty()).collect::<Vec<_>>())
            .unwrap_or_default()
        {
            let references_key = format!("credentials.{name}.references");
            let destinations_key = format!("credentials.{name}.destinations");
            let references: Vec<String> = entries
                .get(&references_key)
                .map(|v| v.split(',').map(str::trim).filter(|r| !r.is_empty()).map(str::to_string).collect())
                .unwrap_or_default();
            if references.is_empty() || references.iter().any(|r| !super::providers::is_reference(r) && !r.ends_with("*}")) {
                errors.push(ConfigError::new(
                    references_key,
                    "is required: the references this credential covers, e.g. ${file:/etc/snow/team-a.properties:*}, ${env:TEAM_A_*}",
                ));
            }
            let destinations = list(&destinations_key, errors).unwrap_or_default();
            if destinations.is_empty() {
                errors.push(ConfigError::new(
                    destinations_key,
                    "is required: the instances, token endpoints, registries and proxies it may go to",
                ));
            }
            credentials.push(Binding { name: name.to_string(), references, destinations });
        }
        for key in entries.keys().filter(|k| k.starts_with("credentials.") && is_key(k)) {
            let name = key.trim_start_matches("credentials.").rsplit_once('.').map_or("", |(n, _)| n);
            if !credentials.iter().any(|c| c.name == name) {
                errors.push(ConfigError::new(key.clone(), format!("names a credential {name:?} that `credentials` does not list")));
            }
        }
        let own = listeners
            .iter()
            .filter_map(|l| {
                let l = l.trim().trim_start_matches("http://").trim_start_matches("https://");
                let (host, port) = l.rsplit_once(':')?;
                Some((host.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase(), port.parse().ok()?))
            })
            .collect();
        Self { enforced: true, lists, own, credentials }
    }

    /// The problems of a caller's `properties` (as written: destination keys are never references).
    pub fn check(&self, properties: &BTreeMap<String, String>) -> Vec<ConfigError> {
        let mut errors = Vec::new();
        if !self.enforced {
            return errors;
        }
        let targets = destinations(properties);
        for (key, kind, url) in &targets {
            let Some(target) = Target::of(url) else { continue };
            // The reserved `.invalid` domain never resolves (RFC 6761): nothing can be sent there
            // (validation stands in such a URL for a missing one).
            if target.host == "invalid" || target.host.ends_with(".invalid") {
                continue;
            }
            if *kind == Kind::Registry && url.contains('?') {
                errors.push(ConfigError::refused(key.clone(), "a registry URL may not carry a query"));
                continue;
            }
            let listed = self.lists.get(kind.list_key());
            // A token endpoint on the instance's host is the instance's.
            let instance_host = targets.iter().find(|(_, k, _)| *k == Kind::Instance).and_then(|(_, _, u)| Target::of(u));
            let on_instance =
                *kind == Kind::Token && instance_host.as_ref().is_some_and(|i| i.host == target.host && i.port == target.port);
            let named = |kind: Kind| self.lists.get(kind.list_key()).is_some_and(|l| l.iter().any(|p| p.matches(&target)));
            let allowed_by_list = named(*kind) || (on_instance && named(Kind::Instance));
            let own = self.own.iter().any(|(h, p)| *p == target.port && (*h == target.host || h == "0.0.0.0" || h == "::"));
            if (target.is_local() || own) && !allowed_by_list {
                errors.push(ConfigError::refused(
                    key.clone(),
                    format!(
                        "{} is {} this worker does not list in {}",
                        target.shown(),
                        if own { "one of the worker's own listeners, which" } else { "a loopback or link-local address, which" },
                        kind.list_key()
                    ),
                ));
            } else if listed.is_some() && !allowed_by_list && (!on_instance || self.lists.contains_key(Kind::Instance.list_key())) {
                errors.push(ConfigError::refused(
                    key.clone(),
                    format!("{} is not a destination this worker allows ({} in worker.properties)", target.shown(), kind.list_key()),
                ));
            }
        }
        if self.credentials.is_empty() {
            return errors;
        }
        for (key, value) in properties.iter().filter(|(_, v)| super::providers::is_reference(v)) {
            let Some(kinds) = goes_to(key) else { continue };
            let bound: Vec<&Binding> = self.credentials.iter().filter(|b| b.covers(value)).collect();
            if bound.is_empty() {
                errors.push(ConfigError::refused(
                    key.clone(),
                    "the reference is not one the worker's named credentials cover (credentials.<name>.references in worker.properties)",
                ));
                continue;
            }
            let sent_to: Vec<Target> = targets
                .iter()
                .filter(|(k, kind, _)| kinds.contains(kind) && same_converter(key, k))
                .filter_map(|(_, _, url)| Target::of(url))
                .collect();
            if let Some(target) = sent_to.iter().find(|t| !bound.iter().any(|b| b.destinations.iter().any(|p| p.matches(t)))) {
                errors.push(ConfigError::refused(
                    key.clone(),
                    format!(
                        "this credential may not be sent to {} (credentials.{}.destinations in worker.properties)",
                        target.shown(),
                        bound[0].name
                    ),
                ));
            }
        }
        errors
    }
}

/// The destinations `properties` name: `(key, kind, url)`.
fn destinations(properties: &BTreeMap<String, String>) -> Vec<(String, Kind, String)> {
    let get = |k: &str| properties.get(k).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
    let mut out = Vec::new();
    if let Some(url) = get("snow.instance.url") {
        out.push(("snow.instance.url".to_string(), Kind::Instance, url.clone()));
        let oauth = get("snow.auth.type").is_some_and(|t| t.starts_with("oauth"));
        match get("snow.auth.token.url") {
            Some(token) => out.push(("snow.auth.token.url".into(), Kind::Token, token)),
            None if oauth => out.push(("snow.instance.url".into(), Kind::Token, format!("{}/oauth_token.do", url.trim_end_matches('/')))),
            None => {}
        }
    } else if let Some(token) = get("snow.auth.token.url") {
        out.push(("snow.auth.token.url".into(), Kind::Token, token));
    }
    for prefix in ["key.converter", "value.converter"] {
        let key = format!("{prefix}.schema.registry.url");
        for url in
            get(&key).map(|v| v.split(',').map(|u| u.trim().to_string()).filter(|u| !u.is_empty()).collect::<Vec<_>>()).unwrap_or_default()
        {
            out.push((key.clone(), Kind::Registry, url));
        }
    }
    if let Some(proxy) = get("snow.proxy.url") {
        let url = if proxy.contains("://") { proxy } else { format!("http://{proxy}") };
        out.push(("snow.proxy.url".into(), Kind::Proxy, url));
    }
    out
}

/// The kinds of destination the value of secret key `key` is sent to (`None`: nowhere, or not a
/// key whose references are bound).
fn goes_to(key: &str) -> Option<&'static [Kind]> {
    match key {
        "snow.auth.username" | "snow.auth.password" => Some(&[Kind::Instance, Kind::Token]),
        "snow.auth.client.id" | "snow.auth.client.secret" => Some(&[Kind::Token]),
        "snow.proxy.username" | "snow.proxy.password" => Some(&[Kind::Proxy]),
        "snow.push.secret" => None,
        k if k.starts_with("snow.instance.ssl.") => Some(&[Kind::Instance]),
        k if k.starts_with("key.converter.") || k.starts_with("value.converter.") => Some(&[Kind::Registry]),
        _ => Some(&[Kind::Instance]),
    }
}

/// Whether destination key `destination` is of the same converter as secret key `secret` (other
/// keys: always).
fn same_converter(secret: &str, destination: &str) -> bool {
    match ["key.converter.", "value.converter."].iter().find(|p| secret.starts_with(**p)) {
        Some(prefix) => destination.starts_with(prefix),
        None => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn policy(pairs: &[(&str, &str)]) -> DestinationPolicy {
        let mut errors = Vec::new();
        let policy = DestinationPolicy::read(&map(pairs), &["0.0.0.0:8083"], &mut errors);
        assert!(errors.is_empty(), "{errors:?}");
        policy
    }

    fn refused(policy: &DestinationPolicy, pairs: &[(&str, &str)]) -> String {
        snow_core::error::config_lines(&policy.check(&map(pairs))).join("\n")
    }

    #[test]
    fn loopback_link_local_and_the_workers_listeners_are_refused_unless_listed() {
        let open = policy(&[]);
        assert_eq!(refused(&open, &[("snow.instance.url", "https://acme.service-now.com")]), "");
        for url in ["http://127.0.0.1:8080", "http://localhost", "http://169.254.169.254", "http://[::1]:80", "http://10.1.2.3:8083"] {
            let why = refused(&open, &[("snow.instance.url", url)]);
            let own = url.ends_with(":8083");
            assert!(why.starts_with("snow.instance.url: ") && (why.contains("loopback or link-local") || own), "{url}: {why}");
        }
        assert!(refused(&open, &[("value.converter.schema.registry.url", "http://169.254.169.254/latest")]).contains("loopback"));
        assert!(refused(&open, &[("value.converter.schema.registry.url", "https://r.example?x=1")]).contains("may not carry a query"));
        assert!(
            refused(&open, &[("snow.instance.url", "https://a.example"), ("snow.proxy.url", "127.0.0.1:3128")]).contains("snow.proxy.url")
        );
        let listed = policy(&[
            ("destinations.instances", "127.0.0.1, *.service-now.com"),
            ("destinations.registries", "https://registry.corp:8081"),
        ]);
        assert_eq!(refused(&listed, &[("snow.instance.url", "http://127.0.0.1:8080")]), "", "listed: allowed");
        assert_eq!(
            refused(&listed, &[("snow.instance.url", "https://acme.service-now.com"), ("snow.auth.type", "oauth_client_credentials")]),
            ""
        );
        assert!(
            refused(&listed, &[("snow.instance.url", "https://evil.example")])
                .contains("not a destination this worker allows (destinations.instances")
        );
        assert!(
            refused(&listed, &[("value.converter.schema.registry.url", "http://registry.corp:8081")]).contains("destinations.registries"),
            "scheme must match"
        );
        let token = refused(
            &listed,
            &[("snow.instance.url", "https://acme.service-now.com"), ("snow.auth.token.url", "https://idp.example/token")],
        );
        assert!(!token.contains("snow.auth.token.url: "), "no token list: only the local ones are refused: {token}");
    }

    #[test]
    fn a_credential_goes_only_to_the_destinations_it_is_bound_to() {
        let bound = policy(&[
            ("credentials", "team-a,team-b"),
            ("credentials.team-a.references", "${file:/etc/snow/team-a.properties:*}"),
            ("credentials.team-a.destinations", "https://team-a.service-now.com"),
            ("credentials.team-b.references", "${env:TEAM_B_PASSWORD}"),
            ("credentials.team-b.destinations", "https://team-b.service-now.com, https://registry.corp:8081"),
        ]);
        let team_a = [("snow.auth.username", "svc"), ("snow.auth.password", "${file:/etc/snow/team-a.properties:password}")];
        let mut own = team_a.to_vec();
        own.push(("snow.instance.url", "https://team-a.service-now.com"));
        assert_eq!(refused(&bound, &own), "");
        let mut stolen = team_a.to_vec();
        stolen.push(("snow.instance.url", "https://team-b.service-now.com"));
        let why = refused(&bound, &stolen);
        assert!(
            why.contains(
                "snow.auth.password: this credential may not be sent to https://team-b.service-now.com:443 (credentials.team-a.destinations"
            ),
            "{why}"
        );
        assert!(!why.contains("team-a.properties"), "the reference is not shown back: {why}");
        let why = refused(&bound, &[("snow.instance.url", "https://team-a.service-now.com"), ("snow.auth.password", "${env:OTHER}")]);
        assert!(why.contains("not one the worker's named credentials cover"), "{why}");
        let registry = [
            ("snow.instance.url", "https://team-b.service-now.com"),
            ("value.converter.schema.registry.url", "https://registry.corp:8081"),
            ("value.converter.basic.auth.user.info", "${env:TEAM_B_PASSWORD}"),
        ];
        assert_eq!(refused(&bound, &registry), "");
        let mut elsewhere = registry.to_vec();
        elsewhere[1] = ("value.converter.schema.registry.url", "https://attacker.example");
        assert!(
            refused(&bound, &elsewhere)
                .contains("value.converter.basic.auth.user.info: this credential may not be sent to https://attacker.example:443")
        );
    }

    #[test]
    fn a_credential_key_without_its_list_is_an_error_naming_it() {
        let mut errors = Vec::new();
        DestinationPolicy::read(&map(&[("credentials", "a"), ("credentials.b.destinations", "x")]), &[], &mut errors);
        let all = snow_core::error::config_lines(&errors).join("\n");
        assert!(all.contains("credentials.a.references: is required") && all.contains("credentials.a.destinations: is required"), "{all}");
        assert!(all.contains("credentials.b.destinations: names a credential \"b\""), "{all}");
    }
}
