//! `kafka-harness`: the test broker as a command, for `make kafka-up`, `make demo` and CI.
//!
//! usage: kafka-harness fetch | up --dir DIR | down --dir DIR | bootstrap --dir DIR

use std::path::PathBuf;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dir = args
        .iter()
        .position(|a| a == "--dir")
        .and_then(|i| args.get(i + 1))
        .map(PathBuf::from)
        .unwrap_or_else(|| kafka_harness::home().join("local"));
    let result = match args.first().map(String::as_str) {
        Some("fetch") => {
            kafka_harness::ensure_jars().map(|libs| println!("Kafka {} jars in {}", kafka_harness::KAFKA_VERSION, libs.display()))
        }
        Some("up") => match kafka_harness::detached_bootstrap(&dir) {
            Some(bootstrap) => {
                println!("{bootstrap}");
                Ok(())
            }
            None => kafka_harness::KafkaBroker::start_detached(&dir).map(|b| println!("{}", b.bootstrap())),
        },
        Some("down") => {
            if kafka_harness::stop_detached(&dir) {
                eprintln!("stopped the broker in {}", dir.display());
            }
            Ok(())
        }
        Some("bootstrap") => match kafka_harness::detached_bootstrap(&dir) {
            Some(b) => {
                println!("{b}");
                Ok(())
            }
            None => Err(std::io::Error::other(format!("no broker running in {}", dir.display()))),
        },
        _ => {
            eprintln!("usage: kafka-harness fetch | up [--dir DIR] | down [--dir DIR] | bootstrap [--dir DIR]");
            std::process::exit(2);
        }
    };
    if let Err(e) = result {
        eprintln!("kafka-harness: {e}");
        std::process::exit(1);
    }
}
