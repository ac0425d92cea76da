//! Kafka Connect's own transforms, run by `tests/kafka/java/SmtHarness.java`: the reference our
//! transforms are compared with. The jars (connect-transforms, connect-json and what they need,
//! `pom-connect.xml`) are fetched once into `target/kafka/connect-<version>/` and the harness is
//! compiled once beside them, both under the harness's fetch lock.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::jars::KAFKA_VERSION;

/// The directory holding the jars and the compiled harness, made on first use.
pub fn ensure() -> io::Result<PathBuf> {
    super::jars::once(&format!("connect-{KAFKA_VERSION}"), ".fetch.lock", |partial| {
        let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
        let status = Command::new("mvn")
            .args(["-q", "-B", "-Dstyle.color=never", "-f"])
            .arg(crate_dir.join("pom-connect.xml"))
            .arg("dependency:copy-dependencies")
            .arg(format!("-DoutputDirectory={}", partial.join("jars").display()))
            .arg(format!("-Dkafka.version={KAFKA_VERSION}"))
            .arg("-DincludeScope=runtime")
            .stdout(Stdio::from(io::stderr()))
            .status()
            .map_err(|e| io::Error::other(format!("running mvn (is Maven installed?): {e}")))?;
        if !status.success() {
            return Err(io::Error::other(format!(
                "mvn could not fetch Kafka Connect {KAFKA_VERSION}'s transforms from Maven Central ({status})"
            )));
        }
        let source = crate_dir.join("java/SmtHarness.java");
        let status = Command::new("javac")
            .arg("-d")
            .arg(partial.join("classes"))
            .arg("-cp")
            .arg(partial.join("jars/*"))
            .arg(&source)
            .stdout(Stdio::from(io::stderr()))
            .status()
            .map_err(|e| io::Error::other(format!("running javac (is a JDK installed?): {e}")))?;
        if !status.success() {
            return Err(io::Error::other(format!("javac could not compile {} ({status})", source.display())));
        }
        Ok(())
    })
}

/// Runs Connect's transforms on `cases` (one JSON case per line, SmtHarness's input) and returns
/// one JSON answer per case.
pub fn run(cases: &str) -> io::Result<Vec<String>> {
    let dir = ensure()?;
    let classpath = format!("{}:{}", dir.join("classes").display(), dir.join("jars/*").display());
    let mut child = Command::new("java")
        .args(["-Duser.timezone=UTC", "-XX:TieredStopAtLevel=1", "-Xshare:auto", "-cp", &classpath, "SmtHarness"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| io::Error::other(format!("running java: {e}")))?;
    // Written from a thread: the answers flow back while the cases are still being written.
    let mut stdin = child.stdin.take().ok_or_else(|| io::Error::other("no stdin"))?;
    let input = cases.to_string();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output()?;
    writer.join().map_err(|_| io::Error::other("the writer thread panicked"))??;
    if !out.status.success() {
        return Err(io::Error::other(format!("SmtHarness failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr))));
    }
    Ok(String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect())
}
