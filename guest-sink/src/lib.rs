//! The ServiceNow sink connector as a WASI 0.2 component (world `sink` of `wit/`).
//!
//! Thin by design: it converts WIT values to snow-core values and back. Routing, operation
//! resolution, body mapping and the Table API are snow-core's; ServiceNow is reached only through
//! `wasi:http`.
#![cfg(all(target_arch = "wasm32", target_os = "wasi"))]

mod bindings;
#[path = "../../guest-source/src/convert.rs"]
mod convert;

use std::cell::RefCell;

use bindings::exports::snow::connector::sink_api::{self as api, Guest, GuestSinkTask};
use bindings::snow::connector::types as wit;
use snow_core::clock::WasiClock;
use snow_core::config::SinkConfig;
use snow_core::http::wasi::WasiTransport;
use snow_core::record::{Operation, Outcome, SinkRecord, SkipReason};
use snow_core::sink::SinkTask;

pub(crate) struct Component;

impl Guest for Component {
    type SinkTask = Lane;

    fn validate(config: wit::Config) -> Result<(), Vec<wit::ConfigError>> {
        let entries = convert::entries(config).map_err(convert::config_errors)?;
        SinkConfig::parse(&entries).map(drop).map_err(convert::config_errors)
    }
}

/// One partition lane: records of one partition, in offset order.
struct Lane {
    inner: RefCell<SinkTask<WasiTransport, WasiClock>>,
}

impl GuestSinkTask for Lane {
    fn open(config: wit::Config) -> Result<api::SinkTask, wit::SnowError> {
        let entries = convert::entries(config).map_err(convert::error)?;
        let task = SinkTask::open(&entries, WasiTransport::default(), WasiClock).map_err(convert::error)?;
        Ok(api::SinkTask::new(Lane { inner: RefCell::new(task) }))
    }

    fn put(&self, records: Vec<wit::SinkRecord>) -> Vec<wit::Outcome> {
        let records: Vec<SinkRecord> = records
            .into_iter()
            .map(|r| SinkRecord {
                topic: r.topic,
                partition: r.partition,
                offset: r.offset,
                key: r.key,
                value: r.value,
                headers: convert::headers_in(r.headers),
                timestamp_ms: r.timestamp_ms,
            })
            .collect();
        let mut task = self.inner.borrow_mut();
        let before = task.counters();
        let outcomes = task.put(&records);
        convert::report_rate_limit(task.label(), task.rate_limit());
        let after = task.counters();
        for (name, n) in [
            ("snow_sink_unknown_outcomes_total", after.unknown_outcomes - before.unknown_outcomes),
            ("snow_sink_found_after_unknown_total", after.found_after_unknown - before.found_after_unknown),
            ("snow_sink_resent_blind_total", after.resent_blind - before.resent_blind),
            ("snow_sink_found_after_refusal_total", after.found_after_refusal - before.found_after_refusal),
            ("snow_sink_found_on_takeover_total", after.found_on_takeover - before.found_on_takeover),
            ("snow_sink_batches_total", after.batches - before.batches),
            ("snow_sink_batch_refused_total", after.batch_refused - before.batch_refused),
            ("snow_sink_unknown_fields_dropped_total", after.unknown_fields_dropped - before.unknown_fields_dropped),
            ("snow_sink_unknown_fields_reported_total", after.unknown_fields_reported - before.unknown_fields_reported),
        ] {
            convert::count(task.label(), name, n);
        }
        for notice in task.take_notices() {
            convert::log(bindings::snow::connector::host::Level::Warn, &notice);
        }
        if after.batch_refused > before.batch_refused {
            convert::log(
                bindings::snow::connector::host::Level::Warn,
                &format!("{}: the instance refused the Batch API; writing through the Table API", task.label()),
            );
        }
        outcomes
            .into_iter()
            .map(|outcome| match outcome {
                Outcome::Written(w) => wit::Outcome::Written(wit::Written {
                    operation: operation(w.operation),
                    table: w.table,
                    sys_id: w.sys_id,
                    status: w.status,
                }),
                Outcome::Skipped(s) => wit::Outcome::Skipped(wit::Skipped {
                    table: s.table,
                    sys_id: s.sys_id,
                    reason: match s.reason {
                        SkipReason::NotFound => wit::SkipReason::NotFound,
                        SkipReason::Stale => wit::SkipReason::Stale,
                    },
                }),
                Outcome::Failed(e) => wit::Outcome::Failed(convert::error(e)),
            })
            .collect()
    }
}

fn operation(op: Operation) -> wit::Operation {
    match op {
        Operation::Create => wit::Operation::Create,
        Operation::Patch => wit::Operation::Patch,
        Operation::Put => wit::Operation::Put,
        Operation::Delete => wit::Operation::Delete,
    }
}
