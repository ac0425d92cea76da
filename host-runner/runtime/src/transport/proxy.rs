//! An HTTP forward proxy, the way out of an enterprise network: `https://` destinations are
//! reached through a `CONNECT` tunnel (TLS runs end to end, the proxy sees only the host name),
//! `http://` ones by sending the request to the proxy in absolute form. Basic proxy
//! authentication, and a no-proxy list of hosts reached directly.
//!
//! A proxy is only a way out: what may be reached is decided before (the outbound gate for guest
//! requests), and the only tunnel opened is to the destination the request names.

use std::net::IpAddr;
use std::time::Duration;

use http::HeaderValue;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use wasmtime_wasi_http::Error as HttpError;

/// Largest answer head read from a proxy refusing or accepting a tunnel.
const MAX_HEAD: usize = 16 << 10;

/// A configured proxy. Its `Debug` shows the URL only.
#[derive(Clone)]
pub struct Proxy {
    id: u64,
    /// `http://host:port`, for messages.
    url: String,
    /// `host:port`.
    authority: String,
    /// `Basic …` (marked sensitive), when the proxy asks for credentials.
    authorization: Option<HeaderValue>,
    /// Who the credentials are, for messages: the key naming them.
    credentials_key: &'static str,
    no_proxy: Vec<NoProxy>,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Proxy({})", self.url)
    }
}

/// One entry of the no-proxy list.
#[derive(Debug, Clone, PartialEq, Eq)]
enum NoProxy {
    /// `*`: no host goes through the proxy.
    All,
    /// A host name and its subdomains (`example.com`, `.example.com`), on any port or one.
    Domain(String, Option<u16>),
    /// An address range (`10.0.0.0/8`, `::1`).
    Network(IpAddr, u8),
}

impl Proxy {
    /// The proxy at `url` (`http://host:port` or `host:port`), with Basic `credentials` when it
    /// asks for them, reaching the hosts of `no_proxy` (comma-separated) directly. The error says
    /// what is wrong with `url` or `no_proxy` (without the password), for the caller to name the key.
    pub fn new(url: &str, credentials: Option<(&str, &str)>, no_proxy: &str) -> Result<Self, (ProxyPart, String)> {
        let url = url.trim();
        let rest = match url.split_once("://") {
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("http") => rest,
            Some((scheme, _)) => {
                return Err((
                    ProxyPart::Url,
                    format!(
                        "{scheme}:// proxies are not supported: give the proxy as http://host:port (https destinations are tunnelled through it with CONNECT)"
                    ),
                ));
            }
            None => url,
        };
        let authority = rest.trim_end_matches('/');
        if authority.contains(['@', '/', '?', '#']) || authority.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err((ProxyPart::Url, "must be http://host:port with nothing else (credentials go in their own keys)".to_string()));
        }
        let parsed: http::uri::Authority = authority.parse().map_err(|_| (ProxyPart::Url, format!("{authority:?} is not host:port")))?;
        let Some(port) = parsed.port_u16().filter(|p| *p > 0) else {
            return Err((ProxyPart::Url, format!("{authority:?} names no port (e.g. http://proxy.example.com:3128)")));
        };
        let host = parsed.host().to_ascii_lowercase();
        let authority = format!("{host}:{port}");
        let authorization = match credentials {
            Some((user, password)) => {
                let value = snow_core::auth::basic::authorization(user, password);
                let mut value = HeaderValue::from_str(&value)
                    .map_err(|_| (ProxyPart::Credentials, "contain characters not allowed in a header".to_string()))?;
                value.set_sensitive(true);
                Some(value)
            }
            None => None,
        };
        let no_proxy = no_proxy
            .split(',')
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .map(|e| parse_no_proxy(e).ok_or_else(|| (ProxyPart::NoProxy, format!("{e:?} is not a host, a domain, an address or a range"))))
            .collect::<Result<Vec<_>, _>>()?;
        let id = {
            use sha2::{Digest, Sha256};
            let mut digest = Sha256::new();
            for part in
                [authority.as_bytes(), authorization.as_ref().map_or(&b""[..], |a| a.as_bytes()), format!("{no_proxy:?}").as_bytes()]
            {
                digest.update((part.len() as u64).to_be_bytes());
                digest.update(part);
            }
            let digest: [u8; 32] = digest.finalize().into();
            u64::from_be_bytes(digest[..8].try_into().unwrap_or_default()).max(1)
        };
        Ok(Self { id, url: format!("http://{authority}"), authority, authorization, credentials_key: "", no_proxy })
    }

    /// The same proxy, its messages naming `key_prefix` (e.g. `snow.proxy`) for the credentials.
    pub fn named(mut self, key_prefix: &'static str) -> Self {
        self.credentials_key = key_prefix;
        self
    }

    /// What tells proxies apart (never 0: that is going direct); equal settings, equal ids.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// `http://host:port`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The proxy's `host:port`.
    pub fn authority(&self) -> &str {
        &self.authority
    }

    /// Whether a request to `host` (lower case, an IPv6 address without brackets) on `port` goes
    /// through the proxy.
    pub fn applies_to(&self, host: &str, port: u16) -> bool {
        let host = host.trim_start_matches('[').trim_end_matches(']').trim_end_matches('.').to_ascii_lowercase();
        let address: Option<IpAddr> = host.parse().ok();
        !self.no_proxy.iter().any(|entry| match entry {
            NoProxy::All => true,
            NoProxy::Domain(domain, only) => {
                only.is_none_or(|p| p == port)
                    && (host == *domain || host.strip_suffix(domain.as_str()).is_some_and(|head| head.ends_with('.')))
            }
            NoProxy::Network(network, bits) => address.is_some_and(|a| in_network(a, *network, *bits)),
        })
    }

    /// The `Proxy-Authorization` value, if credentials are configured.
    pub(super) fn authorization(&self) -> Option<&HeaderValue> {
        self.authorization.as_ref()
    }

    /// A TCP connection to the proxy.
    pub(super) async fn connect(&self, timeout: Duration) -> Result<TcpStream, HttpError> {
        match tokio::time::timeout(timeout, TcpStream::connect(&self.authority)).await {
            Ok(Ok(stream)) => {
                let _ = stream.set_nodelay(true);
                Ok(stream)
            }
            Ok(Err(e)) => Err(super::not_sent(format!("cannot connect to the proxy {}: {e}", self.url))),
            Err(_) => Err(super::not_sent(format!("connecting to the proxy {} timed out", self.url))),
        }
    }

    /// A tunnel to `target` (`host:port`) through the proxy, ready for TLS.
    pub(super) async fn tunnel(&self, target: &str, timeout: Duration) -> Result<TcpStream, HttpError> {
        let mut stream = self.connect(timeout).await?;
        let mut head = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n").into_bytes();
        if let Some(authorization) = &self.authorization {
            head.extend_from_slice(b"Proxy-Authorization: ");
            head.extend_from_slice(authorization.as_bytes());
            head.extend_from_slice(b"\r\n");
        }
        head.extend_from_slice(b"\r\n");
        let exchange = async {
            stream.write_all(&head).await?;
            read_head(&mut stream).await
        };
        let answer = match tokio::time::timeout(timeout, exchange).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(e)) => return Err(super::not_sent(format!("the proxy {} failed while opening a tunnel to {target}: {e}", self.url))),
            Err(_) => return Err(super::not_sent(format!("the proxy {} did not open a tunnel to {target} in time", self.url))),
        };
        let status_line = answer.lines().next().unwrap_or_default();
        let status: u16 = status_line.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
        match status {
            200..=299 => Ok(stream),
            407 => Err(self.refused_credentials()),
            _ => Err(super::not_sent(format!("the proxy {} would not open a tunnel to {target}: {}", self.url, printable(status_line)))),
        }
    }

    /// The error for a proxy answering 407.
    pub(super) fn refused_credentials(&self) -> HttpError {
        let keys = if self.credentials_key.is_empty() {
            "the proxy credentials".to_string()
        } else {
            format!("{0}.username and {0}.password", self.credentials_key)
        };
        super::not_sent(match self.authorization {
            Some(_) => format!("the proxy {} refused the credentials (407 Proxy Authentication Required): check {keys}", self.url),
            None => format!("the proxy {} asks for credentials (407 Proxy Authentication Required): set {keys}", self.url),
        })
    }
}

/// Which setting of a proxy is wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProxyPart {
    /// Its URL.
    Url,
    /// Its user or password.
    Credentials,
    /// The no-proxy list.
    NoProxy,
}

/// The answer head, up to the blank line (nothing after it is read: TLS follows a tunnel).
async fn read_head(stream: &mut TcpStream) -> std::io::Result<String> {
    let mut head = Vec::with_capacity(256);
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() >= MAX_HEAD {
            return Err(std::io::Error::other("its answer head is too long"));
        }
        if stream.read(&mut byte).await? == 0 {
            return Err(std::io::Error::other("it closed the connection before answering"));
        }
        head.push(byte[0]);
    }
    Ok(String::from_utf8_lossy(&head).into_owned())
}

/// `text` without control characters, at most 200 characters (a proxy's words in our messages).
fn printable(text: &str) -> String {
    text.chars().filter(|c| !c.is_control()).take(200).collect()
}

fn parse_no_proxy(entry: &str) -> Option<NoProxy> {
    if entry == "*" {
        return Some(NoProxy::All);
    }
    if let Some((network, bits)) = entry.split_once('/') {
        let network: IpAddr = network.trim_start_matches('[').trim_end_matches(']').parse().ok()?;
        let bits: u8 = bits.parse().ok()?;
        let max = if network.is_ipv4() { 32 } else { 128 };
        return (bits <= max).then_some(NoProxy::Network(network, bits));
    }
    let bare = entry.trim_start_matches('[').trim_end_matches(']');
    if let Ok(address) = bare.parse::<IpAddr>() {
        return Some(NoProxy::Network(address, if address.is_ipv4() { 32 } else { 128 }));
    }
    let entry = entry.trim_start_matches("*.").trim_start_matches('.').to_ascii_lowercase();
    let (host, port) = match entry.rsplit_once(':') {
        Some((host, port)) => (host.to_string(), Some(port.parse::<u16>().ok()?)),
        None => (entry, None),
    };
    let valid = !host.is_empty() && host.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'));
    if let Some(address) = host.parse::<IpAddr>().ok().filter(|_| port.is_some()) {
        // An address with a port: the address on any port (as curl does).
        return Some(NoProxy::Network(address, if address.is_ipv4() { 32 } else { 128 }));
    }
    valid.then_some(NoProxy::Domain(host.trim_end_matches('.').to_string(), port))
}

fn in_network(address: IpAddr, network: IpAddr, bits: u8) -> bool {
    match (address, network) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let mask = if bits == 0 { 0 } else { u32::MAX << (32 - u32::from(bits)) };
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let mask = if bits == 0 { 0 } else { u128::MAX << (128 - u32::from(bits)) };
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_no_proxy_list_matches_hosts_domains_ports_and_ranges() {
        let proxy = Proxy::new("http://proxy.corp:3128", None, " internal.corp, .svc.local:8443, 10.0.0.0/8, ::1, localhost ").unwrap();
        assert_eq!((proxy.url(), proxy.authority()), ("http://proxy.corp:3128", "proxy.corp:3128"));
        for (host, port, through) in [
            ("acme.service-now.com", 443, true),
            ("internal.corp", 443, false),
            ("a.internal.corp", 80, false),
            ("notinternal.corp", 443, true),
            ("api.svc.local", 8443, false),
            ("api.svc.local", 443, true),
            ("10.1.2.3", 443, false),
            ("11.1.2.3", 443, true),
            ("[::1]", 443, false),
            ("LOCALHOST", 80, false),
        ] {
            assert_eq!(proxy.applies_to(host, port), through, "{host}:{port}");
        }
        assert!(!Proxy::new("proxy:3128", None, "*").unwrap().applies_to("anything", 443));
    }

    #[test]
    fn a_proxy_url_is_http_host_and_port_and_the_error_never_holds_the_password() {
        assert_eq!(Proxy::new("proxy.corp:3128", None, "").unwrap().url(), "http://proxy.corp:3128", "Confluent's form");
        for (url, expected) in [
            ("https://proxy:3128", "https:// proxies are not supported"),
            ("http://user:pw@proxy:3128", "nothing else"),
            ("http://proxy", "names no port"),
            ("http://proxy:3128/path", "nothing else"),
        ] {
            let (part, message) = Proxy::new(url, Some(("u", "hunter2")), "").unwrap_err();
            assert_eq!(part, ProxyPart::Url);
            assert!(message.contains(expected) && !message.contains("hunter2") && !message.contains("pw@"), "{url}: {message}");
        }
        assert_eq!(Proxy::new("proxy:1", None, "10.0.0.0/40").unwrap_err().0, ProxyPart::NoProxy);
        let with = Proxy::new("proxy:3128", Some(("u", "hunter2")), "").unwrap();
        assert!(!format!("{with:?}").contains("hunter2") && !format!("{with:?}").contains("dTpodW50ZXIy"));
        assert_ne!(with.id(), Proxy::new("proxy:3128", Some(("u", "other")), "").unwrap().id(), "other credentials, other connections");
        assert_eq!(with.id(), Proxy::new("http://PROXY:3128/", Some(("u", "hunter2")), "").unwrap().id());
    }
}
