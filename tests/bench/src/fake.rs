//! A fake-snow process for the benchmarks (release build, its own process so the measured host
//! shares the machine with it as with an instance's network), driven through its admin API.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::paths::release_bin;

/// A fake-snow process, stopped on drop.
pub struct Fake {
    child: Child,
    addr: String,
}

impl Fake {
    pub fn start(dir: &Path, label: &str) -> Result<Self> {
        Self::start_with_tables(dir, label, &["incident"])
    }

    /// A fake serving `tables`.
    pub fn start_with_tables(dir: &Path, label: &str, tables: &[&str]) -> Result<Self> {
        let port_file = dir.join(format!("{label}.port"));
        let child = Command::new(release_bin("fake-snow"))
            .args(["--port", "0", "--port-file"])
            .arg(&port_file)
            .args(tables.iter().flat_map(|t| ["--table", t]))
            .stdout(Stdio::null())
            .spawn()
            .context("starting fake-snow")?;
        let started = Instant::now();
        while !port_file.exists() {
            if started.elapsed() > Duration::from_secs(30) {
                bail!("fake-snow did not start");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_millis(50));
        Ok(Self { child, addr: format!("127.0.0.1:{}", std::fs::read_to_string(&port_file)?.trim()) })
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Deletes row `id` of `table` through the Table API (the fake runs without users).
    pub fn delete_row(&self, table: &str, id: &str) -> Result<()> {
        let mut stream = TcpStream::connect(&self.addr)?;
        write!(stream, "DELETE /api/now/table/{table}/{id} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer)?;
        let head = String::from_utf8_lossy(&answer[..answer.len().min(20)]).to_string();
        anyhow::ensure!(head.contains(" 204") || head.contains(" 200"), "deleting {table}/{id}: {head}");
        Ok(())
    }

    /// One admin call; the JSON answer.
    pub fn admin(&self, method: &str, path: &str, body: &str) -> Result<Value> {
        let mut stream = TcpStream::connect(&self.addr)?;
        write!(
            stream,
            "{method} /__fake/{path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer)?;
        let text = String::from_utf8_lossy(&answer);
        let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
        serde_json::from_str(body).with_context(|| format!("{method} /__fake/{path}: {}", &body[..body.len().min(200)]))
    }

    /// Seeds `count` rows into `table` from `start`, `spread_seconds` apart first to last.
    pub fn seed_table(&self, table: &str, count: u64, start: &str, spread_seconds: u64) -> Result<()> {
        self.admin(
            "POST",
            &format!("tables/{table}/seed"),
            &format!(r#"{{"count":{count},"start":"{start}","spread_seconds":{spread_seconds}}}"#),
        )
        .map(drop)
    }

    pub fn seed(&self, count: u64, at: &str, spread_seconds: u64) -> Result<()> {
        let body = if spread_seconds == 0 {
            format!(r#"{{"count":{count},"at":"{at}"}}"#)
        } else {
            format!(r#"{{"count":{count},"start":"{at}","spread_seconds":{spread_seconds}}}"#)
        };
        self.admin("POST", "tables/incident/seed", &body).map(drop)
    }

    /// The sys_ids of the incident rows it holds.
    pub fn sys_ids(&self) -> Result<Vec<String>> {
        Ok(self.admin("GET", "tables/incident", "")?["rows"]
            .as_array()
            .context("rows")?
            .iter()
            .filter_map(|r| r["sys_id"].as_str().map(str::to_string))
            .collect())
    }

    pub fn readable(&self) -> Result<u64> {
        self.admin("GET", "tables/incident/count", "")?["readable"].as_u64().context("readable count")
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `YYYY-MM-DD HH:MM:SS` of `secs` since the epoch.
pub fn stamp(secs: i64) -> String {
    snow_core::time::Timestamp(secs).to_string()
}

pub fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}
