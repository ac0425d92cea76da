//! A sink component for tests that writes nothing: every record is reported written, except a
//! record whose value is `trap`, on which `put` traps (a bug in a component, as the host sees it).
//! The host must reopen the lane and, after `component.trap.budget` traps in a row, park it.
//! A test makes a build that traps on every record by rewriting [`MODE`] in a copy of the
//! component (`snow-rogue-mode:normal` to `snow-rogue-mode:trap!!`): a new version that breaks.
#![cfg(all(target_arch = "wasm32", target_os = "wasi"))]

mod bindings;

use bindings::exports::snow::connector::sink_api::{self as api, Guest, GuestSinkTask};
use bindings::snow::connector::types as wit;

pub(crate) struct Component;

/// This build's mode, as bytes a test may rewrite in a copy of the component.
static MODE: [u8; 22] = *b"snow-rogue-mode:normal";

/// Whether this build traps on every record (the bytes in the component decide: see `black_box`).
fn trap_build() -> bool {
    core::hint::black_box(&MODE)[16..].starts_with(b"trap")
}

impl Guest for Component {
    type SinkTask = Lane;

    fn validate(_config: wit::Config) -> Result<(), Vec<wit::ConfigError>> {
        Ok(())
    }
}

/// A lane that writes nothing.
pub(crate) struct Lane;

impl GuestSinkTask for Lane {
    fn open(_config: wit::Config) -> Result<api::SinkTask, wit::SnowError> {
        Ok(api::SinkTask::new(Lane))
    }

    fn put(&self, records: Vec<wit::SinkRecord>) -> Vec<wit::Outcome> {
        records
            .iter()
            .map(|r| {
                if r.value.as_deref() == Some(b"trap") || trap_build() {
                    panic!("rogue-sink traps on record {}-{}@{}", r.topic, r.partition, r.offset);
                }
                wit::Outcome::Written(wit::Written {
                    operation: wit::Operation::Patch,
                    table: "rogue".into(),
                    sys_id: format!("{:032x}", r.offset),
                    status: 200,
                })
            })
            .collect()
    }
}
