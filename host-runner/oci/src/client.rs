//! A small client of the OCI distribution API (v1.1): manifests, blobs, uploads and the
//! referrers API, over the process's HTTP transport (so a registry is reached through the same
//! proxy and TLS settings as any destination: [`snow_runtime::transport`]). It authenticates as a
//! registry's challenge asks ([`crate::auth`]), follows a blob's redirect to its storage without
//! credentials, and checks every digest it is given against the bytes it read.

use anyhow::{Context, Result, bail};
use snow_core::http::{Method, Request, Response, Timeouts};
use snow_runtime::transport::Route;
use tokio::sync::Mutex;

use crate::artifact::Descriptor;
use crate::auth::{Challenge, Credentials};
use crate::reference::sha256_hex;

/// Largest manifest or index read.
pub const MAX_MANIFEST: usize = 4 << 20;

/// The manifest kinds asked for.
const ACCEPT: &str = "application/vnd.oci.image.manifest.v1+json, application/vnd.oci.image.index.v1+json, \
                      application/vnd.docker.distribution.manifest.v2+json";

/// A manifest (or index) as read: its bytes, media type and the hex SHA-256 of the bytes.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// The bytes.
    pub bytes: Vec<u8>,
    /// The `Content-Type` the registry gave (or the manifest's own `mediaType`).
    pub media_type: String,
    /// The hex SHA-256 of `bytes`.
    pub digest: String,
}

/// One registry, as `host[:port]` names it.
pub struct Registry {
    name: String,
    base: String,
    route: Route,
    credentials: Option<Credentials>,
    authorization: Mutex<Option<String>>,
}

impl Registry {
    /// The registry `name` (`host[:port]`), over HTTPS unless `plain_http`, reached the way
    /// `route` says, with the credentials filed for it.
    pub fn new(name: &str, plain_http: bool, route: Route, credentials: Option<Credentials>) -> Self {
        // Docker Hub's API is not on the name images carry.
        let host = if name == "docker.io" || name == "index.docker.io" { "registry-1.docker.io" } else { name };
        let scheme = if plain_http { "http" } else { "https" };
        Self { name: name.to_string(), base: format!("{scheme}://{host}"), route, credentials, authorization: Mutex::new(None) }
    }

    /// The registry's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The manifest `reference` (a tag or `sha256:<hex>`) of `repository`; `None` when the
    /// registry has none by that reference. A digest reference is checked against the bytes.
    pub async fn manifest(&self, repository: &str, reference: &str) -> Result<Option<Fetched>> {
        let url = format!("{}/v2/{repository}/manifests/{reference}", self.base);
        let response =
            self.send(Method::Get, &url, vec![("Accept".into(), ACCEPT.into())], Vec::new(), MAX_MANIFEST, repository, false).await?;
        if response.status == 404 {
            return Ok(None);
        }
        self.expect(&response, &[200], "GET", &url)?;
        let digest = sha256_hex(&response.body);
        if let Some(hex) = reference.strip_prefix("sha256:")
            && hex != digest
        {
            bail!("{}: the manifest {repository}@{reference} it served has digest sha256:{digest}; refused", self.name);
        }
        let declared = serde_json::from_slice::<serde_json::Value>(&response.body)
            .ok()
            .and_then(|v| v.get("mediaType").and_then(|m| m.as_str()).map(str::to_string));
        let media_type = declared.or_else(|| response.header("content-type").map(str::to_string)).unwrap_or_default();
        Ok(Some(Fetched { bytes: response.body, media_type, digest }))
    }

    /// The blob `hex` of `repository` (at most `max` bytes), checked against its digest.
    pub async fn blob(&self, repository: &str, hex: &str, max: usize) -> Result<Vec<u8>> {
        let mut url = format!("{}/v2/{repository}/blobs/sha256:{hex}", self.base);
        let mut credentials = true;
        for _ in 0..6 {
            let response = if credentials {
                self.send(Method::Get, &url, Vec::new(), Vec::new(), max, repository, false).await?
            } else {
                send(Method::Get, &url, Vec::new(), Vec::new(), max, &self.route).await?
            };
            if matches!(response.status, 301 | 302 | 303 | 307 | 308) {
                let location = response.header("location").with_context(|| format!("{}: a redirect without a Location", self.name))?;
                url = absolute(&url, location);
                // Storage behind a redirect gets no credential of the registry's.
                credentials = same_origin(&url, &self.base);
                continue;
            }
            self.expect(&response, &[200], "GET", &url)?;
            let actual = sha256_hex(&response.body);
            if actual != hex {
                bail!("{}: the blob {repository}@sha256:{hex} it served has digest sha256:{actual}; refused", self.name);
            }
            return Ok(response.body);
        }
        bail!("{}: more than 5 redirects for the blob {repository}@sha256:{hex}", self.name)
    }

    /// Uploads `bytes` as a blob of `repository` (one POST, one PUT); returns its descriptor's
    /// digest (hex).
    pub async fn push_blob(&self, repository: &str, bytes: &[u8]) -> Result<String> {
        let hex = sha256_hex(bytes);
        let url = format!("{}/v2/{repository}/blobs/uploads/", self.base);
        let started = self.send(Method::Post, &url, Vec::new(), Vec::new(), 1 << 16, repository, true).await?;
        self.expect(&started, &[202], "POST", &url)?;
        let location = started.header("location").with_context(|| format!("{}: an upload without a Location", self.name))?;
        let upload = absolute(&url, location);
        let separator = if upload.contains('?') { '&' } else { '?' };
        let put = format!("{upload}{separator}digest=sha256%3A{hex}");
        let headers = vec![("Content-Type".into(), "application/octet-stream".into())];
        let done = self.send(Method::Put, &put, headers, bytes.to_vec(), 1 << 16, repository, true).await?;
        self.expect(&done, &[201], "PUT", &upload)?;
        Ok(hex)
    }

    /// Stores `bytes` as the manifest `reference` (a tag or a digest) of `repository`; returns
    /// the manifest's hex digest and whether the registry took its subject (`OCI-Subject`).
    pub async fn push_manifest(&self, repository: &str, reference: &str, bytes: &[u8], media_type: &str) -> Result<(String, bool)> {
        let url = format!("{}/v2/{repository}/manifests/{reference}", self.base);
        let headers = vec![("Content-Type".into(), media_type.into())];
        let response = self.send(Method::Put, &url, headers, bytes.to_vec(), 1 << 16, repository, true).await?;
        self.expect(&response, &[201], "PUT", &url)?;
        Ok((sha256_hex(bytes), response.header("oci-subject").is_some()))
    }

    /// The referrers of the manifest `hex` (asked for `artifact_type`), from the referrers API; `None`
    /// when the registry does not serve it (the caller falls back to the tag schema).
    pub async fn referrers(&self, repository: &str, hex: &str, artifact_type: &str) -> Result<Option<Vec<Descriptor>>> {
        let url = format!("{}/v2/{repository}/referrers/sha256:{hex}?artifactType={}", self.base, encode(artifact_type));
        let headers = vec![("Accept".into(), "application/vnd.oci.image.index.v1+json".into())];
        let response = self.send(Method::Get, &url, headers, Vec::new(), MAX_MANIFEST, repository, false).await?;
        if response.status == 404 {
            return Ok(None);
        }
        self.expect(&response, &[200], "GET", &url)?;
        let index: crate::artifact::Index = serde_json::from_slice(&response.body)
            .map_err(|e| anyhow::anyhow!("{}: the referrers of sha256:{hex} are not an index: {e}", self.name))?;
        // A registry may ignore the filter (it then says so in OCI-Filters-Applied), and some give
        // the config's media type as the artifact type: the caller filters.
        Ok(Some(index.manifests))
    }

    fn expect(&self, response: &Response, ok: &[u16], method: &str, url: &str) -> Result<()> {
        if ok.contains(&response.status) {
            return Ok(());
        }
        let path = url.split_once("/v2/").map_or(url, |(_, p)| p);
        let path = path.split('?').next().unwrap_or(path);
        let why = registry_errors(&response.body);
        let hint = match response.status {
            401 => " (the registry refused the credentials)",
            403 => " (the credentials filed for this registry may not do this)",
            _ => "",
        };
        bail!("{}: {method} /v2/{path} answered {}{why}{hint}", self.name, response.status)
    }

    /// Sends a request with the registry's authorization, answering one challenge.
    #[allow(clippy::too_many_arguments)]
    async fn send(
        &self,
        method: Method,
        url: &str,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
        max: usize,
        repository: &str,
        push: bool,
    ) -> Result<Response> {
        let mut authorization = self.authorization.lock().await.clone();
        for attempt in 0..2 {
            let mut with = headers.clone();
            with.extend(authorization.clone().map(|a| ("Authorization".to_string(), a)));
            let response = send(method, url, with, body.clone(), max, &self.route).await?;
            if response.status != 401 || attempt == 1 {
                return Ok(response);
            }
            let challenge = response.header("www-authenticate").and_then(Challenge::parse);
            authorization = Some(match challenge {
                Some(Challenge::Basic) => match &self.credentials {
                    Some(c) => c.basic(),
                    None => bail!("{}: asks for credentials and none are filed for it (component.registry.auth.file)", self.name),
                },
                Some(Challenge::Bearer { realm, service, scope }) => {
                    let action = if push { "pull,push" } else { "pull" };
                    let scope = scope.unwrap_or_else(|| format!("repository:{repository}:{action}"));
                    format!("Bearer {}", self.token(&realm, service.as_deref(), &scope).await?)
                }
                None => bail!("{}: answered 401 without a challenge this client speaks (Basic or Bearer)", self.name),
            });
            *self.authorization.lock().await = authorization.clone();
        }
        unreachable!("the loop returns on its second attempt")
    }

    /// A bearer token from `realm`, asked with the registry's credentials when it has some.
    async fn token(&self, realm: &str, service: Option<&str>, scope: &str) -> Result<String> {
        let plain_allowed = realm.starts_with("http://") && self.base.starts_with("http://");
        if !realm.starts_with("https://") && !plain_allowed {
            bail!("{}: names the token service {realm:?}, which is not HTTPS; refused", self.name);
        }
        let mut url = format!("{realm}{}scope={}", if realm.contains('?') { '&' } else { '?' }, encode(scope));
        if let Some(service) = service {
            url.push_str(&format!("&service={}", encode(service)));
        }
        let headers: Vec<(String, String)> = self.credentials.iter().map(|c| ("Authorization".to_string(), c.basic())).collect();
        let response = send(Method::Get, &url, headers, Vec::new(), 1 << 20, &self.route).await?;
        if response.status == 401 || response.status == 403 {
            let whose = if self.credentials.is_some() {
                "the credentials filed for it"
            } else {
                "an anonymous token (no credentials are filed for it)"
            };
            bail!("{}: its token service refused {whose}{}", self.name, registry_errors(&response.body));
        }
        if response.status != 200 {
            bail!("{}: its token service answered {}{}", self.name, response.status, registry_errors(&response.body));
        }
        let answer: serde_json::Value = serde_json::from_slice(&response.body).unwrap_or_default();
        answer
            .get("token")
            .or_else(|| answer.get("access_token"))
            .and_then(serde_json::Value::as_str)
            .filter(|t| !t.is_empty())
            .map(str::to_string)
            .with_context(|| format!("{}: its token service answered without a token", self.name))
    }
}

/// One request on the process's transport.
async fn send(method: Method, url: &str, headers: Vec<(String, String)>, body: Vec<u8>, max: usize, route: &Route) -> Result<Response> {
    let request = Request {
        method,
        url: url.to_string(),
        headers,
        body,
        timeouts: Timeouts { connect_ms: 10_000, first_byte_ms: 60_000, body_ms: 600_000 },
        max_response_bytes: max,
    };
    let host = url.split("://").nth(1).and_then(|r| r.split('/').next()).unwrap_or(url);
    snow_runtime::transport::plain::send(&request, route).await.map_err(|e| anyhow::anyhow!("{host}: {e}"))
}

/// The registry's own words (`{"errors":[{"code","message"}]}`), short.
fn registry_errors(body: &[u8]) -> String {
    let parsed: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    let words: Vec<String> = parsed
        .get("errors")
        .and_then(|e| e.as_array())
        .map(|errors| {
            errors
                .iter()
                .take(3)
                .map(|e| {
                    let field = |k: &str| e.get(k).and_then(|v| v.as_str()).unwrap_or_default();
                    format!("{} {}", field("code"), field("message")).trim().chars().take(200).collect()
                })
                .collect()
        })
        .unwrap_or_default();
    if words.is_empty() { String::new() } else { format!(": {}", words.join("; ")) }
}

/// `location` made absolute against `url`.
fn absolute(url: &str, location: &str) -> String {
    if location.starts_with("http://") || location.starts_with("https://") {
        return location.to_string();
    }
    let origin_end = url.find("://").map_or(0, |i| i + 3);
    let origin = &url[..origin_end + url[origin_end..].find('/').unwrap_or(url.len() - origin_end)];
    if location.starts_with('/') { format!("{origin}{location}") } else { format!("{origin}/{location}") }
}

fn same_origin(url: &str, base: &str) -> bool {
    url == base || url.strip_prefix(base).is_some_and(|rest| rest.starts_with('/'))
}

/// Percent-encodes a query value.
fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| if b.is_ascii_alphanumeric() || b"-._~".contains(&b) { (b as char).to_string() } else { format!("%{b:02X}") })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A registry that answers every request with 200 and `body`: what a compromised or broken
    /// registry serving other bytes than asked for looks like.
    async fn lying_registry(body: &'static [u8]) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let mut request = vec![0u8; 4096];
                let _ = stream.read(&mut request).await;
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/vnd.oci.image.manifest.v1+json\r\nContent-Length: {}\r\n\r\n",
                    body.len()
                );
                let _ = stream.write_all(head.as_bytes()).await;
                let _ = stream.write_all(body).await;
            }
        });
        address
    }

    #[tokio::test]
    async fn bytes_that_do_not_hash_to_the_digest_asked_for_are_refused() {
        let address = lying_registry(b"{\"schemaVersion\":2}").await;
        let registry = Registry::new(&address, true, Route::default(), None);
        let asked = "ab".repeat(32);
        let e = registry.blob("snow/source", &asked, 1 << 20).await.unwrap_err().to_string();
        assert!(e.contains(&format!("@sha256:{asked} it served has digest sha256:")) && e.contains("refused"), "{e}");
        let e = registry.manifest("snow/source", &format!("sha256:{asked}")).await.unwrap_err().to_string();
        assert!(e.contains("it served has digest") && e.contains("refused"), "{e}");
        let by_tag = registry.manifest("snow/source", "1.0").await.unwrap().unwrap();
        assert_eq!(by_tag.digest, sha256_hex(b"{\"schemaVersion\":2}"), "a tag's manifest is what was served, its digest computed here");
    }

    #[test]
    fn locations_and_origins() {
        assert_eq!(absolute("http://r:5000/v2/a/blobs/uploads/", "/v2/a/blobs/uploads/u1?x=1"), "http://r:5000/v2/a/blobs/uploads/u1?x=1");
        assert_eq!(absolute("https://r/v2/x", "https://s3.example/b"), "https://s3.example/b");
        assert!(same_origin("https://r:5000/v2/a", "https://r:5000"));
        assert!(!same_origin("https://r:50001/v2/a", "https://r:5000"), "another port is another origin");
        assert_eq!(encode("repository:a/b:pull,push"), "repository%3Aa%2Fb%3Apull%2Cpush");
        assert_eq!(registry_errors(br#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"not here"}]}"#), ": MANIFEST_UNKNOWN not here");
    }
}
