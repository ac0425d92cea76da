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
    once(&format!("jars-{KAFKA_VERSION}-{JAR_SET}"), ".fetch.lock", |partial| {
        let pom = Path::new(env!("CARGO_MANIFEST_DIR")).join("pom.xml");
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
        Ok(())
    })
}

/// The directory `name` under the harness's home, made once by `fill` (given `<name>.partial`
/// to fill, renamed when it succeeds, so a half-made directory is never taken for a done one),
/// under the file lock `lock` so that concurrent starters do not race.
pub(crate) fn once(name: &str, lock: &str, fill: impl FnOnce(&Path) -> io::Result<()>) -> io::Result<PathBuf> {
    let home = super::home();
    let dir = home.join(name);
    let done = dir.join(".complete");
    if done.exists() {
        return Ok(dir);
    }
    fs::create_dir_all(&home)?;
    let lock = File::create(home.join(lock))?;
    super::process::lock_exclusive(&lock)?;
    if done.exists() {
        return Ok(dir);
    }
    let partial = home.join(format!("{name}.partial"));
    let _ = fs::remove_dir_all(&partial);
    fill(&partial)?;
    let _ = fs::remove_dir_all(&dir);
    fs::rename(&partial, &dir)?;
    File::create(&done)?;
    Ok(dir)
}
