//! Registry credentials and challenges. Credentials come from a file in the format every registry
//! tool writes (`docker login`, `podman login`, `oras login`: `{"auths":{"<registry>":{"auth":
//! base64("user:password")}}}`); each is bound to the registry it is filed under and is sent only
//! to that registry and to the token service that registry's challenge names. A challenge
//! (`WWW-Authenticate`) asks for `Basic` or for a `Bearer` token from a realm (the token flow
//! of Docker Hub, GHCR, Harbor, ECR's proxy, …).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use base64::Engine as _;

/// A user and password (or token) for one registry. Never printed.
#[derive(Clone)]
pub struct Credentials {
    /// The user.
    pub user: String,
    /// The password or personal access token.
    pub secret: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Credentials({}, [hidden])", self.user)
    }
}

impl Credentials {
    /// The `Authorization` value for HTTP Basic.
    pub fn basic(&self) -> String {
        format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{}:{}", self.user, self.secret)))
    }
}

/// The credentials file used when none is configured: `$REGISTRY_AUTH_FILE`, else
/// `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json` (when it exists).
pub fn default_auth_file() -> Option<PathBuf> {
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    env("REGISTRY_AUTH_FILE")
        .or_else(|| env("DOCKER_CONFIG").map(|d| d.join("config.json")))
        .or_else(|| env("HOME").map(|h| h.join(".docker/config.json")))
        .filter(|p| p.is_file())
}

/// The credentials filed for `registry` (`host[:port]`) in the file at `path`; `None` when the
/// file names none for it. Errors name the file, never a credential.
pub fn from_auth_file(path: &Path, registry: &str) -> Result<Option<Credentials>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading the registry credentials file {}", path.display()))?;
    let file: serde_json::Value =
        serde_json::from_str(&text).map_err(|_| anyhow::anyhow!("the registry credentials file {} is not JSON", path.display()))?;
    let auths: BTreeMap<String, serde_json::Value> =
        file.get("auths").cloned().map(serde_json::from_value).transpose().ok().flatten().unwrap_or_default();
    let entry = auths.iter().find(|(key, _)| normalise(key) == registry).map(|(_, v)| v);
    let Some(entry) = entry else {
        let helper = file.get("credHelpers").and_then(|h| h.get(registry)).is_some() || file.get("credsStore").is_some();
        if helper {
            tracing::warn!(
                "{} names a credential helper for {registry}; helpers are not run: file the credentials under \"auths\"",
                path.display()
            );
        }
        return Ok(None);
    };
    let field = |k: &str| entry.get(k).and_then(serde_json::Value::as_str).filter(|v| !v.is_empty());
    if let Some(auth) = field("auth") {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(auth.trim())
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .and_then(|s| s.split_once(':').map(|(u, p)| (u.to_string(), p.to_string())));
        let Some((user, secret)) = decoded else {
            bail!("{}: the \"auth\" of {registry} is not base64 of user:password", path.display());
        };
        return Ok(Some(Credentials { user, secret }));
    }
    match (field("username"), field("password")) {
        (Some(user), Some(secret)) => Ok(Some(Credentials { user: user.into(), secret: secret.into() })),
        _ if field("identitytoken").is_some() => {
            bail!(
                "{}: {registry} has an identity token only; OAuth2 refresh tokens are not supported, log in with a password or access token",
                path.display()
            )
        }
        _ => bail!("{}: the entry of {registry} has neither \"auth\" nor \"username\" and \"password\"", path.display()),
    }
}

/// A key of `auths` as `host[:port]`: `https://index.docker.io/v1/` → `index.docker.io`.
fn normalise(key: &str) -> String {
    let key = key.trim().trim_start_matches("https://").trim_start_matches("http://");
    key.split('/').next().unwrap_or_default().to_ascii_lowercase()
}

/// What a `WWW-Authenticate` header asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Challenge {
    /// HTTP Basic.
    Basic,
    /// A bearer token from `realm`, for `service` and `scope`.
    Bearer {
        /// The token endpoint.
        realm: String,
        /// The service parameter.
        service: Option<String>,
        /// The scope parameter.
        scope: Option<String>,
    },
}

impl Challenge {
    /// Parses a header value; `None` for a scheme this client does not speak.
    pub fn parse(header: &str) -> Option<Self> {
        let header = header.trim();
        let (scheme, rest) = header.split_once(' ').unwrap_or((header, ""));
        if scheme.eq_ignore_ascii_case("basic") {
            return Some(Self::Basic);
        }
        if !scheme.eq_ignore_ascii_case("bearer") {
            return None;
        }
        let params = parameters(rest);
        Some(Self::Bearer {
            realm: params.get("realm")?.clone(),
            service: params.get("service").cloned(),
            scope: params.get("scope").cloned(),
        })
    }
}

/// `key="value", key2=value2` (quoted values may hold commas).
fn parameters(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let Some((key, after)) = rest.split_once('=') else { break };
        let key = key.trim().trim_start_matches(',').trim().to_ascii_lowercase();
        let after = after.trim_start();
        let (value, next) = if let Some(quoted) = after.strip_prefix('"') {
            let mut value = String::new();
            let mut chars = quoted.char_indices();
            let mut end = quoted.len();
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, escaped)) = chars.next() {
                            value.push(escaped);
                        }
                    }
                    '"' => {
                        end = i + 1;
                        break;
                    }
                    c => value.push(c),
                }
            }
            (value, &quoted[end.min(quoted.len())..])
        } else {
            let end = after.find(',').unwrap_or(after.len());
            (after[..end].trim().to_string(), &after[end..])
        };
        out.insert(key, value);
        rest = next.trim_start().trim_start_matches(',').trim_start();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges_are_read_as_registries_write_them() {
        let c =
            Challenge::parse(r#"Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull,push""#);
        assert_eq!(
            c,
            Some(Challenge::Bearer {
                realm: "https://auth.example/token".into(),
                service: Some("registry.example".into()),
                scope: Some("repository:a/b:pull,push".into())
            })
        );
        assert_eq!(Challenge::parse(r#"Basic realm="x""#), Some(Challenge::Basic));
        assert_eq!(Challenge::parse("Negotiate abc"), None);
        assert_eq!(Challenge::parse("Bearer service=x"), None, "a bearer challenge without a realm is not usable");
    }

    #[test]
    fn credentials_are_bound_to_the_registry_they_are_filed_under() {
        let dir = snow_runtime::files::private_temp_dir("oci-auth-test").unwrap();
        let path = dir.join("config.json");
        let auth = base64::engine::general_purpose::STANDARD.encode("robot:s3cret-value");
        let text = format!(
            r#"{{"auths":{{"registry.example:5000":{{"auth":"{auth}"}},"https://index.docker.io/v1/":{{"username":"u","password":"p"}}}}}}"#
        );
        std::fs::write(&path, text).unwrap();
        let found = from_auth_file(&path, "registry.example:5000").unwrap().unwrap();
        assert_eq!((found.user.as_str(), found.secret.as_str()), ("robot", "s3cret-value"));
        assert!(!format!("{found:?}").contains("s3cret"), "never printed");
        assert_eq!(from_auth_file(&path, "index.docker.io").unwrap().unwrap().user, "u");
        assert!(from_auth_file(&path, "registry.example").unwrap().is_none(), "another port is another registry");
        assert!(from_auth_file(&path, "evil.example").unwrap().is_none());
        std::fs::write(&path, r#"{"auths":{"r.example":{"auth":"bm90LWEtcGFpcg=="}}}"#).unwrap();
        let e = from_auth_file(&path, "r.example").unwrap_err().to_string();
        assert!(e.contains("not base64 of user:password") && !e.contains("bm90"), "{e}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
