//! A real single-node Apache Kafka broker (KRaft) for tests and the demo, from Maven Central jars.
//!
//! The jars are fetched once with `mvn dependency:copy-dependencies` (the `pom.xml` beside this
//! crate) into `target/kafka/jars-<version>/`; later starts do not download. Each broker gets its
//! own directory under `target/kafka/run/`, free ports on 127.0.0.1, a formatted KRaft storage,
//! and is ready when it logged "Kafka Server started" and accepts connections.
//!
//! [`shared`] gives one broker per test process that dies with the process; [`KafkaBroker::start`]
//! an owned one stopped on drop; [`KafkaBroker::start_detached`] one that outlives its starter
//! (`make kafka-up`, the demo), stopped with [`stop_detached`].

pub mod connect_smt;
mod jars;
mod process;
pub mod registry;
pub mod secure;

use std::fs;
use std::io;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub use jars::{KAFKA_VERSION, ensure_jars};

/// How long a broker may take to become ready.
const READY_TIMEOUT: Duration = Duration::from_secs(90);

/// A running broker.
#[derive(Debug)]
pub struct KafkaBroker {
    bootstrap: String,
    pid: u32,
    dir: PathBuf,
    owned: bool,
}

/// Where the harness keeps jars and broker directories: `target/kafka` of the workspace, or
/// `SNOW_KAFKA_HOME`.
pub fn home() -> PathBuf {
    std::env::var_os("SNOW_KAFKA_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/kafka"))
}

/// The broker shared by every test of this process; it is killed when the process exits.
pub fn shared() -> &'static KafkaBroker {
    static BROKER: OnceLock<KafkaBroker> = OnceLock::new();
    BROKER.get_or_init(|| tied(None).unwrap_or_else(|e| panic!("starting Kafka: {e}")))
}

/// A broker (secured as `secure` asks) that the kernel kills when this process exits: the thread
/// that starts it (PR_SET_PDEATHSIG) lives as long as the process.
fn tied(secure: Option<secure::Request>) -> io::Result<KafkaBroker> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("kafka-broker-keeper".into())
        .spawn(move || {
            let started = KafkaBroker::launch(&home().join("run"), process::Lifetime::TiedToThread, secure.as_ref());
            let failed = started.is_err();
            let _ = tx.send(started);
            if !failed {
                loop {
                    std::thread::park();
                }
            }
        })
        .expect("starting the broker keeper thread");
    let mut broker = rx.recv().expect("the keeper thread answers")?;
    broker.owned = false;
    Ok(broker)
}

impl KafkaBroker {
    /// Starts a broker that is stopped when this value is dropped.
    pub fn start() -> io::Result<Self> {
        Self::launch(&home().join("run"), process::Lifetime::UntilDropped, None)
    }

    /// Starts a broker in `dir` that keeps running after this process ends.
    pub fn start_detached(dir: &Path) -> io::Result<Self> {
        let mut broker = Self::launch(dir, process::Lifetime::Detached, None)?;
        broker.owned = false;
        fs::write(dir.join("bootstrap"), &broker.bootstrap)?;
        fs::write(dir.join("pid"), broker.pid.to_string())?;
        Ok(broker)
    }

    /// `127.0.0.1:PORT`.
    pub fn bootstrap(&self) -> &str {
        &self.bootstrap
    }

    /// The broker's process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Kills the broker process at once (SIGKILL, as a crash would), keeping its data directory and
    /// ports so that [`KafkaBroker::restart`] brings the same broker back. Returns once it is gone.
    pub fn kill(&mut self) {
        process::kill(self.pid);
    }

    /// Starts the broker again in its directory, on the same ports and with the data it had; returns
    /// once it is ready.
    pub fn restart(&mut self) -> io::Result<()> {
        let libs = ensure_jars()?;
        let port = self.bootstrap.rsplit_once(':').and_then(|(_, p)| p.parse::<u16>().ok()).unwrap_or(0);
        self.pid = process::spawn_broker(&libs, &self.dir, process::Lifetime::UntilDropped)?;
        wait_ready(&self.dir, self.pid, port)
    }

    /// The broker's directory (its log, certificates, configuration).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn launch(parent: &Path, lifetime: process::Lifetime, secure: Option<&secure::Request>) -> io::Result<Self> {
        let libs = ensure_jars()?;
        let dir = match lifetime {
            process::Lifetime::Detached => parent.to_path_buf(),
            _ => {
                process::remove_stale(parent);
                let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
                parent.join(format!("{}-{nanos}", std::process::id()))
            }
        };
        let _ = fs::remove_dir_all(dir.join("data"));
        fs::create_dir_all(dir.join("data"))?;
        let (port, controller_port) = (free_port()?, free_port()?);
        let secured = secure.map(|request| secure::prepare(&dir, request)).transpose()?;
        let mut properties = server_properties(&dir, port, controller_port);
        if let Some(secured) = &secured {
            properties = secured.apply(&properties);
        }
        fs::write(dir.join("server.properties"), properties)?;
        fs::write(dir.join("log4j2.properties"), LOG4J2)?;
        process::format_storage(&libs, &dir, secured.as_ref().map(|s| s.format_args.as_slice()).unwrap_or_default())?;
        let pid = process::spawn_broker(&libs, &dir, lifetime)?;
        let broker = Self { bootstrap: format!("127.0.0.1:{port}"), pid, dir: dir.clone(), owned: true };
        if let Err(e) = wait_ready(&dir, pid, port) {
            process::stop(pid, Duration::from_secs(5));
            return Err(e);
        }
        Ok(broker)
    }
}

impl Drop for KafkaBroker {
    fn drop(&mut self) {
        if self.owned {
            process::stop(self.pid, Duration::from_secs(15));
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

/// Stops the detached broker started in `dir`; true if one was running.
pub fn stop_detached(dir: &Path) -> bool {
    let Some(pid) = fs::read_to_string(dir.join("pid")).ok().and_then(|p| p.trim().parse::<u32>().ok()) else { return false };
    let was_running = process::alive(pid);
    process::stop(pid, Duration::from_secs(15));
    let _ = fs::remove_file(dir.join("pid"));
    let _ = fs::remove_file(dir.join("bootstrap"));
    let _ = fs::remove_dir_all(dir.join("data"));
    was_running
}

/// The bootstrap address of the detached broker in `dir`, if it is running.
pub fn detached_bootstrap(dir: &Path) -> Option<String> {
    let pid = fs::read_to_string(dir.join("pid")).ok()?.trim().parse::<u32>().ok()?;
    process::alive(pid).then(|| fs::read_to_string(dir.join("bootstrap")).ok()).flatten()
}

fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn server_properties(dir: &Path, port: u16, controller_port: u16) -> String {
    format!(
        "process.roles=broker,controller\n\
         node.id=1\n\
         controller.quorum.voters=1@127.0.0.1:{controller_port}\n\
         listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}\n\
         advertised.listeners=PLAINTEXT://127.0.0.1:{port}\n\
         controller.listener.names=CONTROLLER\n\
         inter.broker.listener.name=PLAINTEXT\n\
         listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n\
         log.dirs={}\n\
         num.partitions=1\n\
         offsets.topic.replication.factor=1\n\
         offsets.topic.num.partitions=4\n\
         transaction.state.log.replication.factor=1\n\
         transaction.state.log.min.isr=1\n\
         share.coordinator.state.topic.replication.factor=1\n\
         share.coordinator.state.topic.min.isr=1\n\
         group.initial.rebalance.delay.ms=0\n\
         auto.create.topics.enable=true\n\
         log.flush.interval.messages=9223372036854775807\n",
        dir.join("data").display()
    )
}

/// Warnings from everything, plus the broker's own "started" line the harness waits for.
const LOG4J2: &str = "status = warn
rootLogger.level = WARN
rootLogger.appenderRef.stdout.ref = STDOUT
appender.stdout.type = Console
appender.stdout.name = STDOUT
appender.stdout.layout.type = PatternLayout
appender.stdout.layout.pattern = [%d] %p %m (%c)%n
logger.raft.name = kafka.server.KafkaRaftServer
logger.raft.level = INFO
";

fn wait_ready(dir: &Path, pid: u32, port: u16) -> io::Result<()> {
    let deadline = Instant::now() + READY_TIMEOUT;
    let log = dir.join("broker.log");
    loop {
        let text = fs::read_to_string(&log).unwrap_or_default();
        if text.contains("Kafka Server started") && TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(());
        }
        if !process::alive(pid) {
            return Err(io::Error::other(format!("the broker exited during startup; last log lines:\n{}", tail(&text, 30))));
        }
        if Instant::now() > deadline {
            return Err(io::Error::other(format!(
                "the broker was not ready after {READY_TIMEOUT:?}; last log lines:\n{}",
                tail(&text, 30)
            )));
        }
        // The broker is another process writing a log file; there is no event to wait on.
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
