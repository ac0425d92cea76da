//! `fake-snow`: the fake ServiceNow as a process, for the demo and for tests in other languages.
//!
//! usage: fake-snow [--port N] [--port-file PATH] [--user NAME:PASSWORD]... [--table NAME]...
//!                  [--seed TABLE:COUNT]... [--seed-span SECONDS]
//! Seeded rows are spread over `--seed-span` seconds (default 3600) ending a minute before now.
//! Runs until SIGINT or SIGTERM.

use std::time::{SystemTime, UNIX_EPOCH};

use fake_snow::{FakeOptions, FakeSnow};

fn main() {
    if let Err(message) = run() {
        eprintln!("fake-snow: {message}");
        std::process::exit(2);
    }
}

fn run() -> Result<(), String> {
    let mut options = FakeOptions::default();
    let (mut port_file, mut seeds, mut span) = (None, Vec::new(), 3600u64);
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--port" => options.port = value()?.parse().map_err(|_| "--port must be a number")?,
            "--port-file" => port_file = Some(value()?),
            "--user" => {
                let v = value()?;
                let (u, p) = v.split_once(':').ok_or("--user takes NAME:PASSWORD")?;
                options.users.push((u.into(), p.into()));
            }
            "--table" => options.tables.push(value()?),
            "--seed-span" => span = value()?.parse().map_err(|_| "--seed-span must be a number of seconds")?,
            "--seed" => {
                let v = value()?;
                let (t, n) = v.split_once(':').ok_or("--seed takes TABLE:COUNT")?;
                seeds.push((t.to_string(), n.parse::<u64>().map_err(|_| "--seed count must be a number")?));
            }
            "-h" | "--help" => {
                println!(
                    "usage: fake-snow [--port N] [--port-file PATH] [--user NAME:PASSWORD]... [--table NAME]... [--seed TABLE:COUNT]..."
                );
                return Ok(());
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    let fake = FakeSnow::start(options).map_err(|e| format!("cannot start: {e}"))?;
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
    for (table, count) in seeds {
        fake.shared().seed(&table, count, now - 60 - span as i64, span);
        println!("seeded {count} rows into {table}");
    }
    if let Some(path) = port_file {
        std::fs::write(&path, fake.addr().port().to_string()).map_err(|e| format!("writing {path}: {e}"))?;
    }
    println!("fake-snow listening on {}", fake.url());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    rt.block_on(async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).map_err(|e| e.to_string())?;
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {},
            _ = term.recv() => {},
        }
        Ok::<(), String>(())
    })?;
    drop(fake);
    Ok(())
}
