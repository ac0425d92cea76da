//! Apache Kafka Connect for tests: a real 4.1.1 distributed worker (the jars `make test` fetched
//! into `target/connect/jars-4.1.1`) on the shared broker, with our plugin on its `plugin.path`,
//! laid out as an operator installs it: the plugin jar `make test` built, this build's
//! `snow-connect` as the executor, the signed components and the operator's file trusting the
//! development key.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use super::fleet::{Answer, curl, free_port};
use super::{tail, wait_until};

/// Where `make test` put Connect's jars and the plugin jar.
fn connect_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/connect")
}

/// The plugin laid out under `dir/plugins/snow-connect-servicenow` in Confluent Hub's layout (the
/// jar in `lib/` beside `manifest.json`, as the release archive has it); returns the plugin.path
/// (`dir/plugins`).
pub fn plugin_path(dir: &Path) -> PathBuf {
    let jar = connect_dir().join("snow-connect-plugin.jar");
    assert!(jar.is_file(), "{} is missing: `make test` builds it (javac, connect-plugin/)", jar.display());
    let plugin = dir.join("plugins/snow-connect-servicenow");
    let arch = std::env::consts::ARCH;
    fs::create_dir_all(plugin.join(format!("bin/linux-{arch}"))).unwrap();
    fs::create_dir_all(plugin.join("components")).unwrap();
    fs::create_dir_all(plugin.join("lib")).unwrap();
    fs::copy(&jar, plugin.join("lib/snow-connect-plugin.jar")).unwrap();
    fs::write(plugin.join("manifest.json"), r#"{"name": "servicenow", "component_types": ["source", "sink"]}"#).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_snow-connect"), plugin.join(format!("bin/linux-{arch}/snow-connect"))).unwrap();
    for component in [super::signed(guest_artifacts::GUEST_SOURCE), super::signed(guest_artifacts::GUEST_SINK)] {
        let name = Path::new(component).file_name().unwrap().to_string_lossy().into_owned();
        fs::copy(component, plugin.join("components").join(&name)).unwrap();
        fs::copy(format!("{component}.sigstore.json"), plugin.join("components").join(format!("{name}.sigstore.json"))).unwrap();
    }
    // Connectors may name the plugin's own components and those built for the tests (as a fleet
    // worker of the tests may: support::fleet::worker_properties), nothing else on the machine.
    let guests = Path::new(guest_artifacts::GUEST_SOURCE).parent().unwrap().display().to_string();
    fs::write(
        plugin.join("snow-connect.properties"),
        format!("component.trusted.keys={}\ncomponent.paths=components,{guests}\n", super::DEV_PUB),
    )
    .unwrap();
    dir.join("plugins")
}

/// A running Connect worker; killed on drop.
pub struct ConnectWorker {
    child: Option<Child>,
    /// Its REST port.
    pub port: u16,
    properties: PathBuf,
    log4j: PathBuf,
    log: PathBuf,
    env: Vec<(String, String)>,
}

impl ConnectWorker {
    /// Starts a worker of `group` (its internal topics named after it) with `plugin_path`, in
    /// `dir` (log in `dir/<label>.log`), with `env` (what its `${env:…}` config provider reads);
    /// returns once its REST API lists our connectors.
    pub fn start(dir: &Path, label: &str, group: &str, plugin_path: &Path, env: &[(&str, &str)]) -> Self {
        Self::start_with(dir, label, group, plugin_path, env, &[])
    }

    /// [`Self::start`] with `extra` worker properties.
    pub fn start_with(dir: &Path, label: &str, group: &str, plugin_path: &Path, env: &[(&str, &str)], extra: &[(&str, &str)]) -> Self {
        let port = free_port();
        let properties = dir.join(format!("{label}.properties"));
        let keys = [
            ("bootstrap.servers", kafka_harness::shared().bootstrap().to_string()),
            ("group.id", group.to_string()),
            ("config.storage.topic", format!("{group}-configs")),
            ("offset.storage.topic", format!("{group}-offsets")),
            ("status.storage.topic", format!("{group}-status")),
            ("config.storage.replication.factor", "1".into()),
            ("offset.storage.replication.factor", "1".into()),
            ("status.storage.replication.factor", "1".into()),
            ("offset.storage.partitions", "1".into()),
            ("status.storage.partitions", "1".into()),
            ("key.converter", "org.apache.kafka.connect.storage.StringConverter".into()),
            ("value.converter", "org.apache.kafka.connect.json.JsonConverter".into()),
            ("value.converter.schemas.enable", "false".into()),
            ("listeners", format!("http://127.0.0.1:{port}")),
            ("plugin.path", plugin_path.display().to_string()),
            // Connect finds plugins by their ServiceLoader manifests only: the plugin must carry its own.
            ("plugin.discovery", "service_load".into()),
            ("offset.flush.interval.ms", "500".into()),
            // A restarted worker takes its tasks back at once (not after the default 5 minutes).
            ("scheduled.rebalance.max.delay.ms", "0".into()),
            // Secrets stay references in the config topic; each worker resolves them.
            ("config.providers", "env".into()),
            ("config.providers.env.class", "org.apache.kafka.common.config.provider.EnvVarConfigProvider".into()),
        ];
        let lines: String = keys.iter().map(|(k, v)| format!("{k}={v}\n")).chain(extra.iter().map(|(k, v)| format!("{k}={v}\n"))).collect();
        fs::write(&properties, lines).unwrap();
        let log4j = dir.join("log4j2.properties");
        fs::write(
            &log4j,
            "rootLogger.level=INFO\nrootLogger.appenderRef.out.ref=OUT\nappender.out.type=Console\nappender.out.name=OUT\n\
             appender.out.layout.type=PatternLayout\nappender.out.layout.pattern=[%d] %p %m (%c)%n\n\
             logger.reflections.name=org.reflections\nlogger.reflections.level=ERROR\n",
        )
        .unwrap();
        let mut worker = Self {
            child: None,
            port,
            properties,
            log4j,
            log: dir.join(format!("{label}.log")),
            env: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        };
        worker.launch();
        worker
    }

    fn launch(&mut self) {
        let jars = connect_dir().join("jars-4.1.1");
        assert!(jars.join(".complete").is_file(), "{} is missing: `make test` fetches Connect's jars", jars.display());
        let out = fs::OpenOptions::new().create(true).append(true).open(&self.log).unwrap();
        let child = Command::new("java")
            .arg("-Xmx512m")
            // A test's worker lives a minute or two on a shared 2-core machine: C1 only and one GC
            // thread spend far less CPU compiling and collecting than the server defaults.
            .args(["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto"])
            .arg(format!("-Dlog4j2.configurationFile={}", self.log4j.display()))
            .arg("-cp")
            .arg(format!("{}/*", jars.display()))
            .arg("org.apache.kafka.connect.cli.ConnectDistributed")
            .arg(&self.properties)
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .stdin(Stdio::null())
            .spawn()
            .expect("starting Kafka Connect (java)");
        self.child = Some(child);
        let port = self.port;
        wait_until("Kafka Connect's REST API listing our connectors", Duration::from_secs(180), || {
            // Before its listener is up a connection is refused: only then is curl asked.
            std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
            let plugins = curl(port, "GET", "/connector-plugins", None);
            (plugins.status == 200 && plugins.body.to_string().contains("io.snowconnect.ServiceNowSourceConnector")).then_some(())
        });
    }

    /// Kills the worker at once (SIGKILL): nothing flushed, nothing committed on the way out.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the worker again after [`Self::kill`], with the same settings.
    pub fn restart(&mut self) {
        self.kill();
        self.launch();
    }

    /// A REST call to the worker.
    pub fn rest(&self, method: &str, path: &str, body: Option<&Value>) -> Answer {
        curl(self.port, method, path, body)
    }

    /// The worker's log so far.
    pub fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The last `n` lines of the log.
    pub fn log_tail(&self, n: usize) -> String {
        tail(&self.log(), n)
    }

    /// Waits until the connector's status satisfies `check` (its REST `status`), or fails with the log.
    pub fn wait_status(&self, name: &str, what: &str, timeout: Duration, check: impl Fn(&Value) -> bool) -> Value {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let status = self.rest("GET", &format!("/connectors/{name}/status"), None);
            if status.status == 200 && check(&status.body) {
                return status.body;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{name}: no {what} after {timeout:?}; status {}; log:\n{}",
                status.body,
                self.log_tail(40)
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for ConnectWorker {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The process ids of `snow-connect task-executor` processes of the plugin under `plugin_path`.
pub fn executors(plugin_path: &Path) -> Vec<u32> {
    let needle = plugin_path.display().to_string();
    let mut pids = Vec::new();
    for entry in fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(cmdline) = fs::read(entry.path().join("cmdline")) else { continue };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains("task-executor") && cmdline.contains(&needle) {
            pids.push(pid);
        }
    }
    pids
}

/// A connector configuration as a Connect user writes it from our own runner's `entries`: the
/// connector class, and none of what the plugin's installation or Connect owns (the component and
/// its signing policy, the Kafka cluster, the offsets file).
pub fn connect_config(entries: &std::collections::BTreeMap<String, String>, class: &str) -> serde_json::Map<String, Value> {
    let mut config: serde_json::Map<String, Value> = entries
        .iter()
        .filter(|(k, _)| {
            !matches!(k.as_str(), "component.path" | "component.trusted.keys" | "kafka.bootstrap.servers" | "offset.storage.file.filename")
        })
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    config.insert("connector.class".into(), Value::String(class.into()));
    config
}
