//! A real schema registry speaking Confluent's Schema Registry API, for tests: Apicurio Registry
//! (its `ccompat` API) from Maven Central (`io.apicurio:apicurio-registry-app:<v>:tar.gz:all`,
//! unpacked once by `mvn dependency:unpack` into `target/kafka/apicurio-<v>/`), in-memory storage,
//! on free ports of 127.0.0.1. Version 3.0.9 runs on Java 17 (3.3 needs Java 21).
//!
//! [`shared`] gives one registry per test process that the kernel kills with the process;
//! [`SchemaRegistry::start`] an owned one stopped on drop.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::process::{self, Lifetime};

/// The Apicurio Registry release the tests run.
pub const APICURIO_VERSION: &str = "3.0.9";

/// How long the registry may take to answer (3.5 to 9 s measured here; a busy machine is slower).
const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// A running registry.
#[derive(Debug)]
pub struct SchemaRegistry {
    port: u16,
    pid: u32,
    owned: bool,
}

/// One registry for this test process, killed with it.
pub fn shared() -> &'static SchemaRegistry {
    static REGISTRY: OnceLock<SchemaRegistry> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("schema-registry-keeper".into())
            .spawn(move || {
                let started = SchemaRegistry::launch(Lifetime::TiedToThread);
                let failed = started.is_err();
                let _ = tx.send(started);
                if !failed {
                    loop {
                        std::thread::park();
                    }
                }
            })
            .expect("starting the registry keeper thread");
        let mut registry = rx.recv().expect("the keeper thread answers").unwrap_or_else(|e| panic!("starting the schema registry: {e}"));
        registry.owned = false;
        registry
    })
}

impl SchemaRegistry {
    /// Starts a registry that is stopped when this value is dropped.
    pub fn start() -> io::Result<Self> {
        Self::launch(Lifetime::UntilDropped)
    }

    /// The base URL of its Confluent-compatible API (what `schema.registry.url` is set to).
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/apis/ccompat/v7", self.port)
    }

    fn launch(lifetime: Lifetime) -> io::Result<Self> {
        let app = ensure_app()?;
        let dir = super::home().join("run").join(format!("registry-{}-{}", std::process::id(), super::free_port()?));
        fs::create_dir_all(&dir)?;
        let (port, management) = (super::free_port()?, super::free_port()?);
        let mut cmd = Command::new("java");
        cmd.args(["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true"])
            .arg("-Dquarkus.http.host=127.0.0.1")
            .arg(format!("-Dquarkus.http.port={port}"))
            .arg("-Dquarkus.management.host=127.0.0.1")
            .arg(format!("-Dquarkus.management.port={management}"))
            .arg("-jar")
            .arg(app.join(format!("apicurio-registry-app-{APICURIO_VERSION}-runner.jar")))
            .current_dir(&dir);
        let pid = process::spawn(cmd, &dir, File::create(dir.join("registry.log"))?, lifetime)?;
        let registry = Self { port, pid, owned: lifetime == Lifetime::UntilDropped };
        let started = Instant::now();
        while started.elapsed() < READY_TIMEOUT {
            if !process::alive(pid) {
                return Err(io::Error::other(format!(
                    "the schema registry exited while starting; see {}",
                    dir.join("registry.log").display()
                )));
            }
            if request(port, "GET", "/apis/ccompat/v7/subjects", None).is_ok_and(|(status, _)| status == 200) {
                return Ok(registry);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(io::Error::other(format!(
            "the schema registry did not answer within {READY_TIMEOUT:?}; see {}",
            dir.join("registry.log").display()
        )))
    }

    /// `GET path` on the registry: status and body.
    pub fn get(&self, path: &str) -> io::Result<(u16, String)> {
        request(self.port, "GET", path, None)
    }

    /// `POST path` with a JSON `body` (a schema registered by hand, say): status and body.
    pub fn post(&self, path: &str, body: &str) -> io::Result<(u16, String)> {
        request(self.port, "POST", path, Some(body))
    }

    /// `PUT path` with a JSON `body` (a subject's compatibility, say): status and body.
    pub fn put(&self, path: &str, body: &str) -> io::Result<(u16, String)> {
        request(self.port, "PUT", path, Some(body))
    }
}

impl Drop for SchemaRegistry {
    fn drop(&mut self) {
        if self.owned {
            process::stop(self.pid, Duration::from_secs(10));
        }
    }
}

/// The unpacked application, fetched from Maven Central on first use (under a lock).
fn ensure_app() -> io::Result<PathBuf> {
    let home = super::home();
    super::jars::once(&format!("apicurio-{APICURIO_VERSION}"), ".apicurio.lock", |partial| {
        let status = Command::new("mvn")
            .args(["-q", "-B", "-Dstyle.color=never", "dependency:unpack"])
            .arg(format!("-Dartifact=io.apicurio:apicurio-registry-app:{APICURIO_VERSION}:tar.gz:all"))
            .arg(format!("-DoutputDirectory={}", partial.display()))
            .current_dir(&home)
            .stdout(Stdio::from(io::stderr()))
            .status()
            .map_err(|e| io::Error::other(format!("running mvn (is Maven installed?): {e}")))?;
        if !status.success() || !runner_jar(partial).exists() {
            return Err(io::Error::other(format!(
                "mvn could not fetch Apicurio Registry {APICURIO_VERSION} from Maven Central ({status})"
            )));
        }
        Ok(())
    })
}

fn runner_jar(dir: &Path) -> PathBuf {
    dir.join(format!("apicurio-registry-app-{APICURIO_VERSION}-runner.jar"))
}

/// A plain HTTP/1.0 request on 127.0.0.1:`port`, with a JSON body if any: status and body.
fn request(port: u16, method: &str, path: &str, body: Option<&str>) -> io::Result<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let body = body.unwrap_or("");
    write!(
        stream,
        "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nAccept: application/json\r\n\
         Content-Type: application/vnd.schemaregistry.v1+json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    let status = answer.split_whitespace().nth(1).and_then(|s| s.parse().ok()).ok_or_else(|| io::Error::other("no HTTP status"))?;
    let body = answer.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    Ok((status, body))
}
