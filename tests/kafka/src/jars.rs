//! Fetching the broker's jars once, under a file lock so concurrent starters do not race.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The Apache Kafka release the harness runs (Java 17 is enough for 4.x brokers).
pub const KAFKA_VERSION: &str = "4.1.1";

/// Which set of jars `pom.xml` lists (bumped when it changes, so a cache of an older set is not
/// taken for it).
const JAR_SET: &str = "tools";

/// The directory holding the broker's jars, fetching them from Maven Central on first use.
pub fn ensure_jars() -> io::Result<PathBuf> {
    let home = super::home();
    let libs = home.join(format!("jars-{KAFKA_VERSION}-{JAR_SET}"));
    let done = libs.join(".complete");
    if done.exists() {
        return Ok(libs);
    }
    fs::create_dir_all(&home)?;
    let lock = File::create(home.join(".fetch.lock"))?;
    super::process::lock_exclusive(&lock)?;
    if done.exists() {
        return Ok(libs);
    }
    let pom = Path::new(env!("CARGO_MANIFEST_DIR")).join("pom.xml");
    let partial = home.join(format!("jars-{KAFKA_VERSION}-{JAR_SET}.partial"));
    let _ = fs::remove_dir_all(&partial);
    let status = Command::new("mvn")
        .args(["-q", "-B", "-Dstyle.color=never", "-f"])
        .arg(&pom)
        .arg("dependency:copy-dependencies")
        .arg(format!("-DoutputDirectory={}", partial.display()))
        .arg(format!("-Dkafka.version={KAFKA_VERSION}"))
        .arg("-DincludeScope=runtime")
        // Maven's output (with its terminal escapes) goes to stderr: stdout carries the broker address.
        .stdout(Stdio::from(io::stderr()))
        .status()
        .map_err(|e| io::Error::other(format!("running mvn (is Maven installed?): {e}")))?;
    if !status.success() {
        return Err(io::Error::other(format!("mvn could not fetch the Kafka {KAFKA_VERSION} jars from Maven Central ({status})")));
    }
    let _ = fs::remove_dir_all(&libs);
    fs::rename(&partial, &libs)?;
    File::create(&done)?;
    Ok(libs)
}
