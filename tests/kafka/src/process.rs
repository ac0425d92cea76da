//! The broker process: formatting its storage, spawning it, signalling it. The only unsafe code is
//! the `pre_exec` hook that asks the kernel to kill the broker with its starter.
#![allow(unsafe_code)]

use std::fs::{self, File};
use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long the broker lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifetime {
    /// Killed by the kernel when the starting thread ends.
    TiedToThread,
    /// Stopped when the owning value is dropped.
    UntilDropped,
    /// Own session; outlives the starter.
    Detached,
}

/// The classpath of the broker and Kafka's tools.
pub fn classpath(libs: &Path) -> String {
    format!("{}/*", libs.display())
}

/// A fresh KRaft cluster id: 16 bytes in URL-safe base64 without padding.
fn cluster_id() -> String {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0) as u64;
    let mut z = nanos ^ u64::from(std::process::id()).rotate_left(32);
    let mut bytes = Vec::with_capacity(16);
    for _ in 0..2 {
        z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut x = z;
        x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        bytes.extend_from_slice(&(x ^ (x >> 31)).to_be_bytes());
    }
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |acc, (i, b)| acc | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    // An id starting with '-' reads as an option to the storage tool (Kafka's own Uuid.randomUuid
    // never makes one); any other first character is still 16 bytes.
    if out.starts_with('-') {
        out.replace_range(..1, "A");
    }
    out
}

/// Formats the broker's storage directory (`extra`: more arguments, such as SCRAM users).
pub fn format_storage(libs: &Path, dir: &Path, extra: &[String]) -> io::Result<()> {
    let output = Command::new("java")
        .arg("-cp")
        .arg(classpath(libs))
        .arg(format!("-Dlog4j2.configurationFile={}", dir.join("log4j2.properties").display()))
        .args(["kafka.tools.StorageTool", "format", "--ignore-formatted", "-t", &cluster_id(), "-c"])
        .arg(dir.join("server.properties"))
        .args(extra)
        .output()
        .map_err(|e| io::Error::other(format!("running java (is a JDK 17+ installed?): {e}")))?;
    if !output.status.success() {
        return Err(io::Error::other(format!(
            "formatting the Kafka storage failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )));
    }
    Ok(())
}

/// A file in the broker's directory with more JVM options, one per line (system properties a
/// secured listener needs); read at every start, so a restart keeps them.
pub const JVM_OPTIONS: &str = "jvm.options";

/// Spawns the broker with its output in `dir/broker.log`; returns its pid.
pub fn spawn_broker(libs: &Path, dir: &Path, lifetime: Lifetime) -> io::Result<u32> {
    let log = File::create(dir.join("broker.log"))?;
    let options = fs::read_to_string(dir.join(JVM_OPTIONS)).unwrap_or_default();
    let mut cmd = Command::new("java");
    cmd.args(["-Xms256m", "-Xmx1g", "-XX:+UseG1GC", "-Djava.awt.headless=true"])
        .args(options.lines().map(str::trim).filter(|l| !l.is_empty()))
        .arg(format!("-Dlog4j2.configurationFile={}", dir.join("log4j2.properties").display()))
        .arg("-cp")
        .arg(classpath(libs))
        .arg("kafka.Kafka")
        .arg(dir.join("server.properties"));
    spawn(cmd, dir, log, lifetime)
}

/// Spawns `cmd` with its output in `log` and `lifetime`; writes its pid to `dir/pid`.
pub fn spawn(mut cmd: Command, dir: &Path, log: File, lifetime: Lifetime) -> io::Result<u32> {
    cmd.stdin(Stdio::null()).stdout(log.try_clone()?).stderr(log);
    match lifetime {
        Lifetime::TiedToThread => {
            // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
            unsafe {
                cmd.pre_exec(|| {
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                        return Err(io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        Lifetime::Detached => {
            cmd.process_group(0);
        }
        Lifetime::UntilDropped => {}
    }
    let child = cmd.spawn().map_err(|e| io::Error::other(format!("starting java: {e}")))?;
    fs::write(dir.join("pid"), child.id().to_string())?;
    Ok(child.id())
}

/// True while `pid` runs (and is not a zombie).
pub fn alive(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

fn signal(pid: u32, sig: i32) {
    // SAFETY: kill(2) with a pid we started; no memory is shared.
    unsafe {
        libc::kill(pid as i32, sig);
    }
    // Reap it if it is our child, so it does not linger as a zombie.
    let mut status = 0;
    // SAFETY: waitpid with WNOHANG on a pid; harmless if it is not our child.
    unsafe {
        libc::waitpid(pid as i32, &mut status, libc::WNOHANG);
    }
}

/// Stops `pid`: SIGTERM, then SIGKILL after `grace`.
pub fn stop(pid: u32, grace: Duration) {
    if !alive(pid) {
        return;
    }
    signal(pid, libc::SIGTERM);
    let deadline = Instant::now() + grace;
    while alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        signal(pid, 0);
    }
    if alive(pid) {
        signal(pid, libc::SIGKILL);
    }
}

/// Kills `pid` at once (SIGKILL) and waits until it is gone.
pub fn kill(pid: u32) {
    signal(pid, libc::SIGKILL);
    while alive(pid) {
        std::thread::sleep(Duration::from_millis(20));
        signal(pid, 0);
    }
}

/// Removes broker directories under `parent` whose process is gone (left by killed test runs).
/// A directory is named `<starter pid>-<nanos>`: one whose starter still runs may be a broker being
/// set up (no pid file yet) by another thread or process, and is kept.
pub fn remove_stale(parent: &Path) {
    let Ok(entries) = fs::read_dir(parent) else { return };
    for entry in entries.flatten() {
        let dir: PathBuf = entry.path();
        let starter = dir.file_name().and_then(|n| n.to_str()).and_then(|n| n.split('-').next()).and_then(|p| p.parse::<u32>().ok());
        if starter.is_some_and(alive) {
            continue;
        }
        let pid = fs::read_to_string(dir.join("pid")).ok().and_then(|p| p.trim().parse::<u32>().ok());
        if pid.is_none_or(|p| !alive(p)) {
            let _ = fs::remove_dir_all(&dir);
        }
    }
}

/// Takes an exclusive lock on `file`, waiting for it.
pub fn lock_exclusive(file: &File) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a file descriptor we own for the lifetime of the call.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn cluster_ids_never_start_with_a_dash() {
        for _ in 0..2000 {
            let id = super::cluster_id();
            assert_eq!(id.len(), 22);
            assert!(!id.starts_with('-'), "{id}");
        }
    }
}
