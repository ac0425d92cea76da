//! A fleet for tests: `snow-connect worker` processes of one group on the shared broker, and
//! Kafka Connect REST calls made with `curl`, as an operator makes them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use super::{DEFAULT_LOG, Runner, wait_until};

/// A free port on 127.0.0.1 (bound, then released for the worker to take).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// One worker's settings.
pub struct WorkerSpec {
    /// Its REST port.
    pub port: u16,
    /// Its worker.properties.
    pub file: PathBuf,
}

/// Writes `dir/<label>.properties` for a worker of `group` on a free port, with `extra` keys.
pub fn worker_properties(dir: &Path, label: &str, group: &str, extra: &[(&str, &str)]) -> WorkerSpec {
    let port = free_port();
    let mut keys: BTreeMap<String, String> = [
        ("group.id", group.to_string()),
        ("bootstrap.servers", kafka_harness::shared().bootstrap().to_string()),
        ("listeners", format!("http://127.0.0.1:{port}")),
        ("session.timeout.ms", "6000".to_string()),
        ("heartbeat.interval.ms", "1000".to_string()),
        ("offset.storage.partitions", "5".to_string()),
        ("work.slots", "16".to_string()),
        ("component.trusted.keys", super::DEV_PUB.to_string()),
        // Connectors may name the components built for the tests (and nothing else on the machine).
        ("plugin.path", Path::new(guest_artifacts::GUEST_SOURCE).parent().unwrap().display().to_string()),
        // The variables a connector's references may read: the tests' passwords.
        ("config.providers.env.allowed.names", "SNOW_*".to_string()),
        // The fake instances, registries and proxies of the tests listen on loopback, which a
        // worker refuses unless its operator lists it.
        ("destinations.instances", "127.0.0.1".to_string()),
        ("destinations.registries", "127.0.0.1".to_string()),
        ("destinations.proxies", "127.0.0.1".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    for (k, v) in extra {
        keys.insert(k.to_string(), v.to_string());
    }
    let file = dir.join(format!("{label}.properties"));
    std::fs::write(&file, keys.iter().map(|(k, v)| format!("{k}={v}\n")).collect::<String>()).unwrap();
    WorkerSpec { port, file }
}

/// Starts `snow-connect worker --config <file>` with `env` (what `${env:…}` references read).
pub fn start_worker(dir: &Path, label: &str, spec: &WorkerSpec, env: &[(&str, &str)]) -> Runner {
    let mut worker = Runner::command(
        dir,
        label,
        &[std::ffi::OsStr::new("worker"), std::ffi::OsStr::new("--config"), spec.file.as_os_str()],
        DEFAULT_LOG,
        env,
    );
    worker.wait_for_log("REST API on http://", Duration::from_secs(120));
    worker
}

/// A REST answer: status code and JSON body (`Null` when empty).
#[derive(Debug, Clone)]
pub struct Answer {
    /// HTTP status.
    pub status: u16,
    /// The body as JSON.
    pub body: Value,
    /// The body as text.
    pub text: String,
}

/// `curl -X <method> http://127.0.0.1:<port><path>` with a JSON `body`.
pub fn curl(port: u16, method: &str, path: &str, body: Option<&Value>) -> Answer {
    curl_with(&[], &format!("http://127.0.0.1:{port}{path}"), method, body)
}

/// `curl` with extra arguments (credentials, certificates) against `url`.
pub fn curl_with(extra: &[&str], url: &str, method: &str, body: Option<&Value>) -> Answer {
    let mut command = Command::new("curl");
    command.args(["-sS", "-X", method, "-H", "Content-Type: application/json", "-w", "\n%{http_code}"]).args(extra);
    if let Some(body) = body {
        command.args(["--data-binary", &body.to_string()]);
    }
    let out = command.arg(url).output().expect("running curl");
    assert!(out.status.success(), "curl {method} {url}: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, status) = text.rsplit_once('\n').unwrap_or(("", &text));
    Answer { status: status.trim().parse().unwrap(), body: serde_json::from_str(body).unwrap_or(Value::Null), text: body.to_string() }
}

/// The errors a validation answer (Connect's `ConfigInfos`) attaches to `key`.
pub fn validation_errors(answer: &Value, key: &str) -> Vec<String> {
    answer["configs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["value"]["name"] == key)
        .flat_map(|c| c["value"]["errors"].as_array().into_iter().flatten().filter_map(|e| e.as_str().map(str::to_string)))
        .collect()
}

/// Waits until `GET /connectors/<name>/status` on `port` satisfies `check`, and returns it.
pub fn wait_status(port: u16, name: &str, timeout: Duration, what: &str, check: impl Fn(&Value) -> bool) -> Value {
    wait_until(what, timeout, || {
        let answer = curl(port, "GET", &format!("/connectors/{name}/status"), None);
        (answer.status == 200 && check(&answer.body)).then_some(answer.body)
    })
}

/// The tasks of a status answer in `state`.
pub fn tasks_in(status: &Value, state: &str) -> usize {
    status["tasks"].as_array().map(|t| t.iter().filter(|t| t["state"] == state).count()).unwrap_or(0)
}
