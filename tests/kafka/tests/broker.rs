//! The harness starts a real broker that answers on its port, and stops it.
#![allow(clippy::unwrap_used)] // a panic is how a test fails

use std::net::TcpStream;

#[test]
fn starts_answers_and_stops() {
    let broker = kafka_harness::KafkaBroker::start().expect("broker starts");
    let bootstrap = broker.bootstrap().to_string();
    assert!(TcpStream::connect(&bootstrap).is_ok(), "the broker accepts connections");
    drop(broker);
    assert!(TcpStream::connect(&bootstrap).is_err(), "the broker is gone after drop");
}
