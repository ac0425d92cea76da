//! A client of Confluent's Schema Registry API (also served by Apicurio's `ccompat` API and
//! Karapace): register a schema under a subject and get its id, read a schema by id. Answers are
//! cached for the life of the process (an id's schema never changes; a subject's id for the same
//! text does not either). The host is the only one that talks to the registry (ADR 0027); the
//! credentials (`basic.auth.user.info`, `bearer.auth.token`) are attached here and never appear in
//! an error, a log line or a metric.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value as Json, json};
use snow_core::auth::Secret;
use snow_core::http::{Method, Request, Timeouts};

use crate::transport::Route;
use crate::transport::plain;

/// Registry requests wait at most this long for each phase.
const TIMEOUTS: Timeouts = Timeouts { connect_ms: 10_000, first_byte_ms: 30_000, body_ms: 30_000 };
/// A schema answer larger than this is refused.
const MAX_ANSWER: usize = 8 << 20;
/// Transient failures (a refused connection, 5xx) are retried this many times.
const ATTEMPTS: u32 = 5;

/// What a schema is written in (`schemaType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SchemaType {
    /// Avro (the registry's default: sent without `schemaType`).
    Avro,
    /// JSON Schema.
    Json,
    /// Protobuf.
    Protobuf,
}

impl SchemaType {
    /// The registry API's `schemaType`.
    pub fn wire_name(self) -> &'static str {
        match self {
            SchemaType::Avro => "AVRO",
            SchemaType::Json => "JSON",
            SchemaType::Protobuf => "PROTOBUF",
        }
    }

    /// The type an answer's `schemaType` names (absent: Avro, the registry's default).
    fn from_wire(name: Option<&str>) -> Self {
        match name {
            Some("JSON") => SchemaType::Json,
            Some("PROTOBUF") => SchemaType::Protobuf,
            _ => SchemaType::Avro,
        }
    }
}

/// How the registry is authenticated to.
#[derive(Clone, Default)]
pub enum RegistryAuth {
    /// Nothing.
    #[default]
    None,
    /// `basic.auth.credentials.source=USER_INFO` with `basic.auth.user.info=user:password`.
    Basic(Secret),
    /// `bearer.auth.credentials.source=STATIC_TOKEN` with `bearer.auth.token`.
    Bearer(Secret),
}

impl std::fmt::Debug for RegistryAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RegistryAuth::None => "None",
            RegistryAuth::Basic(_) => "Basic([hidden])",
            RegistryAuth::Bearer(_) => "Bearer([hidden])",
        })
    }
}

/// Why the registry did not give what was asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// The registry answered with an error (409 incompatible, 422 invalid, 401/403, 404).
    #[error("the schema registry at {url} answered {status} (error code {code}): {message}")]
    Refused {
        /// The registry's base URL.
        url: String,
        /// HTTP status.
        status: u16,
        /// Confluent's `error_code`.
        code: i64,
        /// Its `message`.
        message: String,
    },
    /// No usable answer (connection refused, timeout, a body that is not the API's).
    #[error("the schema registry at {url} could not be reached: {message}")]
    Unreachable {
        /// The registry's base URL.
        url: String,
        /// What happened.
        message: String,
    },
}

impl RegistryError {
    /// True when the registry refused a schema as incompatible with the subject's earlier ones.
    pub fn is_incompatible(&self) -> bool {
        matches!(self, RegistryError::Refused { status: 409, .. })
    }

    /// True when asking again later may succeed: the registry was out of reach or answered 5xx
    /// or 429.
    pub fn is_transient(&self) -> bool {
        match self {
            RegistryError::Unreachable { .. } => true,
            RegistryError::Refused { status, .. } => *status >= 500 || *status == 429,
        }
    }
}

/// One registry (its base URLs and credentials) with its caches; cheap to clone.
#[derive(Clone)]
pub struct Registry {
    inner: Arc<Inner>,
}

struct Inner {
    urls: Vec<String>,
    auth: RegistryAuth,
    route: Route,
    registered: Mutex<HashMap<(String, SchemaType, String), u32>>,
    by_id: Mutex<HashMap<u32, (SchemaType, String)>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry").field("urls", &self.inner.urls).field("auth", &self.inner.auth).finish()
    }
}

impl Registry {
    /// A client of the registry at `urls` (tried in order; Confluent's `schema.registry.url` is a
    /// comma-separated list).
    pub fn new(urls: Vec<String>, auth: RegistryAuth, route: Route) -> Self {
        let urls = urls.into_iter().map(|u| u.trim_end_matches('/').to_string()).collect();
        let (registered, by_id) = (Mutex::new(HashMap::new()), Mutex::new(HashMap::new()));
        Self { inner: Arc::new(Inner { urls, auth, route, registered, by_id }) }
    }

    /// The first base URL (for messages).
    pub fn url(&self) -> &str {
        self.inner.urls.first().map(String::as_str).unwrap_or("")
    }

    /// Registers `schema` under `subject` (or finds it there) and returns its id.
    pub async fn register(&self, subject: &str, kind: SchemaType, schema: &str) -> Result<u32, RegistryError> {
        self.id_of(&format!("/subjects/{}/versions", percent(subject)), subject, kind, schema).await
    }

    /// The id `schema` already has under `subject` (`auto.register.schemas=false`): a schema the
    /// subject does not hold is the registry's 404, named.
    pub async fn lookup(&self, subject: &str, kind: SchemaType, schema: &str) -> Result<u32, RegistryError> {
        self.id_of(&format!("/subjects/{}", percent(subject)), subject, kind, schema).await
    }

    /// `schema`'s id under `subject` from POSTing it to `path` (registering or looking it up),
    /// cached both ways.
    async fn id_of(&self, path: &str, subject: &str, kind: SchemaType, schema: &str) -> Result<u32, RegistryError> {
        let key = (subject.to_string(), kind, schema.to_string());
        if let Some(id) = self.inner.registered.lock().expect("registry cache").get(&key) {
            return Ok(*id);
        }
        let mut body = json!({ "schema": schema });
        if kind != SchemaType::Avro {
            body["schemaType"] = json!(kind.wire_name());
        }
        let answer = self.send(Method::Post, path, Some(&body)).await?;
        let id = self.id_in(&answer)?;
        self.inner.registered.lock().expect("registry cache").insert(key, id);
        self.inner.by_id.lock().expect("registry cache").insert(id, (kind, schema.to_string()));
        Ok(id)
    }

    /// The latest schema registered under `subject` (its id, type and text), or `None` for a
    /// subject the registry does not have.
    pub async fn latest(&self, subject: &str) -> Result<Option<(u32, SchemaType, String)>, RegistryError> {
        let answer = match self.send(Method::Get, &format!("/subjects/{}/versions/latest", percent(subject)), None).await {
            Ok(answer) => answer,
            Err(RegistryError::Refused { status: 404, .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let (id, (kind, text)) = (self.id_in(&answer)?, self.schema_in(&answer)?);
        self.inner.by_id.lock().expect("registry cache").insert(id, (kind, text.clone()));
        Ok(Some((id, kind, text)))
    }

    /// The schema with registry id `id`: its type and text.
    pub async fn schema(&self, id: u32) -> Result<(SchemaType, String), RegistryError> {
        if let Some(found) = self.inner.by_id.lock().expect("registry cache").get(&id) {
            return Ok(found.clone());
        }
        let answer = self.send(Method::Get, &format!("/schemas/ids/{id}"), None).await?;
        let (kind, text) = self.schema_in(&answer)?;
        self.inner.by_id.lock().expect("registry cache").insert(id, (kind, text.clone()));
        Ok((kind, text))
    }

    /// The schema id an answer carries.
    fn id_in(&self, answer: &Json) -> Result<u32, RegistryError> {
        answer["id"].as_u64().and_then(|id| u32::try_from(id).ok()).ok_or_else(|| self.broken(answer))
    }

    /// The schema's type and text an answer carries.
    fn schema_in(&self, answer: &Json) -> Result<(SchemaType, String), RegistryError> {
        let text = answer["schema"].as_str().ok_or_else(|| self.broken(answer))?.to_string();
        Ok((SchemaType::from_wire(answer["schemaType"].as_str()), text))
    }

    fn broken(&self, answer: &Json) -> RegistryError {
        let shown: String = answer.to_string().chars().take(200).collect();
        RegistryError::Unreachable {
            url: self.url().to_string(),
            message: format!("an answer that is not the Schema Registry API's: {shown}"),
        }
    }

    /// Sends to each URL in turn, retrying transient failures with a growing pause.
    async fn send(&self, method: Method, path: &str, body: Option<&Json>) -> Result<Json, RegistryError> {
        let mut last = None;
        for attempt in 0..ATTEMPTS {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(200 << attempt.min(5))).await;
            }
            for base in &self.inner.urls {
                match self.send_to(base, method, path, body).await {
                    Ok(answer) => return Ok(answer),
                    Err(e @ RegistryError::Refused { status, .. }) if status < 500 && status != 429 => return Err(e),
                    Err(e) => last = Some(e),
                }
            }
        }
        Err(last.unwrap_or_else(|| RegistryError::Unreachable { url: self.url().to_string(), message: "no registry URL".into() }))
    }

    async fn send_to(&self, base: &str, method: Method, path: &str, body: Option<&Json>) -> Result<Json, RegistryError> {
        let mut headers = vec![
            ("accept".to_string(), "application/vnd.schemaregistry.v1+json, application/json".to_string()),
            ("content-type".to_string(), "application/vnd.schemaregistry.v1+json".to_string()),
        ];
        match &self.inner.auth {
            RegistryAuth::None => {}
            RegistryAuth::Basic(user_info) => {
                let encoded = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, user_info.expose());
                headers.push(("authorization".into(), format!("Basic {encoded}")));
            }
            RegistryAuth::Bearer(token) => headers.push(("authorization".into(), format!("Bearer {}", token.expose()))),
        }
        let request = Request {
            method,
            url: format!("{base}{path}"),
            headers,
            body: body.map(|b| b.to_string().into_bytes()).unwrap_or_default(),
            timeouts: TIMEOUTS,
            max_response_bytes: MAX_ANSWER,
        };
        let response = plain::send(&request, &self.inner.route)
            .await
            .map_err(|e| RegistryError::Unreachable { url: base.to_string(), message: e.to_string() })?;
        let answer: Json = serde_json::from_slice(&response.body).unwrap_or(Json::Null);
        if (200..300).contains(&response.status) {
            return Ok(answer);
        }
        let message = answer["message"]
            .as_str()
            .map(str::to_string)
            // Only a registry's own JSON error is quoted; another host's answer is not read back.
            .unwrap_or_else(|| format!("{} bytes that are not a registry's JSON error", response.body.len()));
        Err(RegistryError::Refused {
            url: base.to_string(),
            status: response.status,
            code: answer["error_code"].as_i64().unwrap_or(0),
            message: crate::redact::scrub(&message).into_owned(),
        })
    }
}

/// `subject` as a path segment.
fn percent(subject: &str) -> String {
    subject
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') { (b as char).to_string() } else { format!("%{b:02X}") }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_are_escaped_and_credentials_never_shown() {
        assert_eq!(percent("servicenow.incident-value"), "servicenow.incident-value");
        assert_eq!(percent("a b/c"), "a%20b%2Fc");
        let r = Registry::new(vec!["http://r:8081/".into()], RegistryAuth::Basic(Secret::new("u:hunter2")), Default::default());
        assert_eq!(r.url(), "http://r:8081");
        assert!(!format!("{r:?}").contains("hunter2"));
    }

    #[test]
    fn only_an_unreachable_or_overloaded_registry_is_worth_asking_again() {
        let refused = |status| RegistryError::Refused { url: "u".into(), status, code: 0, message: String::new() };
        assert!(RegistryError::Unreachable { url: "u".into(), message: String::new() }.is_transient());
        assert!(refused(503).is_transient() && refused(429).is_transient());
        assert!(!refused(409).is_transient() && !refused(401).is_transient() && !refused(422).is_transient());
    }
}
