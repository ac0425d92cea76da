//! `--apply http://worker:8083`: creating or updating the translated connectors on a running
//! fleet through Kafka Connect's REST API, and nothing else. A connector that exists and was not
//! made by a migration (its configuration has no `snow.migrated.from`) is refused unless forced;
//! a connector with a starting position to write (from `migrate cutover`) is created stopped
//! (KIP-980's `initial_state`), or stopped first when it exists, its offsets written with
//! `PATCH /connectors/<name>/offsets` (KIP-875 allows it only then), and resumed. A connector of
//! ours that already holds a position keeps it (it has run since) unless forced.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use snow_core::http::{Method, Request, Timeouts};

use super::output::{Connector, fleet_json};

/// How long the fleet may take to stop a connector before its offsets can be written.
const STOP_DEADLINE: Duration = Duration::from_secs(120);

const TIMEOUTS: Timeouts = Timeouts { connect_ms: 10_000, first_byte_ms: 60_000, body_ms: 60_000 };

/// A fleet's REST API.
pub struct Fleet {
    base: String,
    /// `user:password` for HTTP Basic (`SNOW_CONNECT_REST_USER_INFO`), never shown.
    user_info: Option<String>,
}

/// What happened to one connector.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "outcome", content = "detail", rename_all = "snake_case")]
pub enum Applied {
    /// Created running.
    Created,
    /// Created stopped, its offsets written, then resumed.
    CreatedAtPosition,
    /// Its configuration replaced (it was made by a migration, or `--force`).
    Updated,
    /// Stopped, reconfigured, its offsets written, resumed.
    UpdatedAtPosition,
    /// Reconfigured; the position it already holds kept (it has run: `--force` writes the new one).
    UpdatedKeepingPosition,
    /// Left alone: why.
    Refused(String),
    /// The fleet refused a step: which, and its answer.
    Failed(String),
}

impl Fleet {
    /// The fleet at `base` (`http(s)://host:port`).
    pub fn new(base: &str, user_info: Option<String>) -> Self {
        Self { base: base.trim_end_matches('/').to_string(), user_info }
    }

    async fn call(&self, method: Method, path: &str, body: Option<&Value>) -> Result<(u16, Value), String> {
        let mut headers = vec![("accept".to_string(), "application/json".to_string())];
        if body.is_some() {
            headers.push(("content-type".into(), "application/json".into()));
        }
        if let Some(user_info) = &self.user_info {
            let encoded = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, user_info);
            headers.push(("authorization".into(), format!("Basic {encoded}")));
        }
        let request = Request {
            method,
            url: format!("{}{path}", self.base),
            headers,
            body: body.map(|b| b.to_string().into_bytes()).unwrap_or_default(),
            timeouts: TIMEOUTS,
            max_response_bytes: 16 << 20,
        };
        let response = snow_runtime::transport::plain::send(&request, &snow_runtime::transport::Route::default())
            .await
            .map_err(|e| format!("{method} {path}: {e}"))?;
        let answer = serde_json::from_slice(&response.body).unwrap_or(Value::Null);
        Ok((response.status, answer))
    }

    async fn expect(&self, method: Method, path: &str, body: Option<&Value>) -> Result<Value, String> {
        let (status, answer) = self.call(method, path, body).await?;
        if (200..300).contains(&status) {
            Ok(answer)
        } else {
            Err(format!("{method} {path} answered {status}: {}", answer.get("message").and_then(Value::as_str).unwrap_or("")))
        }
    }

    /// Writes `offsets` (a KIP-875 body) once the fleet has stopped `name`.
    async fn write_offsets(&self, name: &str, offsets: &Value) -> Result<(), String> {
        let path = format!("/connectors/{}/offsets", encode(name));
        let deadline = Instant::now() + STOP_DEADLINE;
        loop {
            let (status, answer) = self.call(Method::Patch, &path, Some(offsets)).await?;
            if (200..300).contains(&status) {
                return Ok(());
            }
            let message = answer.get("message").and_then(Value::as_str).unwrap_or("").to_string();
            if !(status == 400 && message.contains("STOPPED state")) || Instant::now() > deadline {
                return Err(format!("PATCH {path} answered {status}: {message}"));
            }
            // The fleet is still stopping the connector's units: ask again shortly.
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Creates or updates `c`; with `offsets`, at that position.
    pub async fn apply(&self, c: &Connector, offsets: Option<&Value>, force: bool) -> Applied {
        match self.apply_steps(c, offsets, force).await {
            Ok(applied) => applied,
            Err(e) => Applied::Failed(e),
        }
    }

    async fn apply_steps(&self, c: &Connector, offsets: Option<&Value>, force: bool) -> Result<Applied, String> {
        let name = encode(&c.name);
        let body = fleet_json(c);
        let (status, existing) = self.call(Method::Get, &format!("/connectors/{name}/config"), None).await?;
        match status {
            404 => match offsets {
                None => {
                    self.expect(Method::Post, "/connectors", Some(&body)).await?;
                    Ok(Applied::Created)
                }
                Some(offsets) => {
                    let mut stopped = body.clone();
                    stopped["initial_state"] = json!("STOPPED");
                    self.expect(Method::Post, "/connectors", Some(&stopped)).await?;
                    self.write_offsets(&c.name, offsets).await?;
                    self.expect(Method::Put, &format!("/connectors/{name}/resume"), None).await?;
                    Ok(Applied::CreatedAtPosition)
                }
            },
            200 => {
                if existing.get("snow.migrated.from").is_none() && !force {
                    return Ok(Applied::Refused(format!(
                        "connector {} exists and was not made by a migration (no snow.migrated.from in its configuration); \
                         --force replaces it",
                        c.name
                    )));
                }
                let config = &body["config"];
                match offsets {
                    None => {
                        self.expect(Method::Put, &format!("/connectors/{name}/config"), Some(config)).await?;
                        Ok(Applied::Updated)
                    }
                    Some(offsets) if !force && self.holds_position(&name, offsets).await? => {
                        self.expect(Method::Put, &format!("/connectors/{name}/config"), Some(config)).await?;
                        Ok(Applied::UpdatedKeepingPosition)
                    }
                    Some(offsets) => {
                        self.expect(Method::Put, &format!("/connectors/{name}/stop"), None).await?;
                        self.expect(Method::Put, &format!("/connectors/{name}/config"), Some(config)).await?;
                        self.write_offsets(&c.name, offsets).await?;
                        self.expect(Method::Put, &format!("/connectors/{name}/resume"), None).await?;
                        Ok(Applied::UpdatedAtPosition)
                    }
                }
            }
            other => Err(format!("GET /connectors/{name}/config answered {other}")),
        }
    }
}

impl Fleet {
    /// True when connector `name` already holds an offset for a partition of `offsets`: it has
    /// run since its position was written, and its own is newer.
    async fn holds_position(&self, name: &str, offsets: &Value) -> Result<bool, String> {
        let held = self.expect(Method::Get, &format!("/connectors/{name}/offsets"), None).await?;
        let held: Vec<&Value> =
            held["offsets"].as_array().into_iter().flatten().filter(|o| !o["offset"].is_null()).map(|o| &o["partition"]).collect();
        Ok(offsets["offsets"].as_array().into_iter().flatten().any(|o| held.contains(&&o["partition"])))
    }
}

/// A connector name as one path segment.
fn encode(name: &str) -> String {
    name.bytes()
        .map(|b| if b.is_ascii_alphanumeric() || b"-._~".contains(&b) { (b as char).to_string() } else { format!("%{b:02X}") })
        .collect()
}
