//! The ServiceNow source connector as a WASI 0.2 component (world `source-push` of `wit/`: the
//! `source` world and the optional `source-wake` export, ADR 0032).
//!
//! Thin by design: it converts WIT values to snow-core values and back. The cursor, the Table API
//! and the records are snow-core's; ServiceNow is reached only through `wasi:http`.
#![cfg(all(target_arch = "wasm32", target_os = "wasi"))]

mod bindings;
mod convert;

use std::cell::RefCell;

use bindings::exports::snow::connector::source_api::{self as api, Guest, GuestSourceTask};
use bindings::snow::connector::host::Level;
use bindings::snow::connector::types as wit;
use snow_core::clock::WasiClock;
use snow_core::config::SourceConfig;
use snow_core::cursor::Hidden;
use snow_core::http::wasi::WasiTransport;
use snow_core::record::{SourceOffset, SourceRecord, Span};
use snow_core::source::SourceTask;
use snow_core::source::follower::Follows;

pub(crate) struct Component;

impl Guest for Component {
    type SourceTask = Task;

    fn validate(config: wit::Config) -> Result<(), Vec<wit::ConfigError>> {
        let entries = convert::entries(config).map_err(convert::config_errors)?;
        SourceConfig::parse(&entries).map(drop).map_err(convert::config_errors)
    }

    fn plan(config: wit::Config, max_tasks: u32) -> Result<Vec<wit::TaskConfig>, wit::SnowError> {
        let entries = convert::entries(config).map_err(convert::error)?;
        let plan = snow_core::source::plan(&entries, max_tasks).map_err(convert::error)?;
        Ok(plan
            .into_iter()
            .map(|units| wit::TaskConfig {
                units: units
                    .into_iter()
                    .map(|u| wit::WorkUnit { partition: u.partition, name: u.name, config: convert::config(u.config) })
                    .collect(),
            })
            .collect())
    }
}

/// One table's stream, polled sequentially by the host.
struct Task {
    inner: RefCell<SourceTask<WasiTransport, WasiClock>>,
}

impl bindings::exports::snow::connector::source_wake::Guest for Component {
    fn wake(task: api::SourceTaskBorrow<'_>, updated_on: String) -> Result<(), wit::SnowError> {
        task.get::<Task>().inner.borrow_mut().wake(&updated_on).map_err(convert::error)
    }
}

impl GuestSourceTask for Task {
    fn open(config: wit::Config, offsets: Vec<wit::SourceOffset>) -> Result<api::SourceTask, wit::SnowError> {
        let entries = convert::entries(config).map_err(convert::error)?;
        let offsets: Vec<SourceOffset> =
            offsets.into_iter().map(|o| SourceOffset { partition: o.partition, position: o.position }).collect();
        let task = SourceTask::open(&entries, &offsets, WasiTransport::default(), WasiClock).map_err(convert::error)?;
        match task.snapshots() {
            Some(s) => {
                let last = s.finished().map_or("none yet".to_string(), |t| format!("the last started {t}"));
                convert::log(Level::Info, &format!("opened for snapshots ({last}); the topic holds {} keys", s.held()));
            }
            None => {
                let cursor = task.cursor();
                convert::log(Level::Info, &format!("opened at cursor {} {:?}", cursor.ts, cursor.id));
            }
        }
        if task.backfill_slices() > 0 {
            convert::log(Level::Info, &format!("a parallel backfill resumes: {} slices still read", task.backfill_slices()));
        }
        if let Some(deletes) = task.deletes() {
            let at = deletes.cursor();
            convert::log(Level::Info, &format!("deletes resume after {} {:?}", at.ts, at.id));
        }
        if let Some(journal) = task.journal() {
            let at = journal.cursor();
            convert::log(Level::Info, &format!("journal entries resume after {} {:?}", at.ts, at.id));
        }
        if let Some(attachments) = task.attachments() {
            let at = attachments.cursor();
            convert::log(Level::Info, &format!("attachments resume after {} {:?}", at.ts, at.id));
        }
        Ok(api::SourceTask::new(Task { inner: RefCell::new(task) }))
    }

    fn poll(&self) -> Result<wit::PollBatch, wit::SnowError> {
        let mut task = self.inner.borrow_mut();
        let before = task.counters();
        let batch = task.poll();
        convert::report_rate_limit(task.table(), task.rate_limit());
        if let Some(lag) = task.lag_seconds() {
            convert::gauge(task.table(), "snow_source_lag_seconds", lag as f64);
        }
        let hidden = match task.hidden() {
            Hidden::Rest(rows) => rows as f64,
            Hidden::None | Hidden::ScanLimit(_) => 0.0,
        };
        convert::gauge(task.table(), "snow_source_hidden_rows", hidden);
        for note in task.take_notes() {
            convert::log(if note.info { Level::Info } else { Level::Warn }, &note.message);
        }
        let after = task.counters();
        convert::count(task.table(), "snow_source_duplicates_suppressed_total", after.duplicates_suppressed - before.duplicates_suppressed);
        convert::count(task.table(), "snow_source_bad_rows_skipped_total", after.bad_rows_skipped - before.bad_rows_skipped);
        convert::count(task.table(), "snow_source_request_micros_total", after.request_micros - before.request_micros);
        convert::count(task.table(), "snow_source_parse_micros_total", after.parse_micros - before.parse_micros);
        convert::count(task.table(), "snow_source_build_micros_total", after.build_micros - before.build_micros);
        let batch = batch.map_err(convert::error)?;
        Ok(wit::PollBatch {
            topic: batch.topic,
            headers: convert::headers_out(batch.headers),
            data: batch.data,
            extra: batch.extra,
            record_headers: batch.record_headers.into_iter().map(|h| wit::HeaderSpan { key: span(h.key), value: span(h.value) }).collect(),
            records: batch.records.into_iter().map(record).collect(),
            offset: batch.offset.map(|o| wit::SourceOffset { partition: o.partition, position: o.position }),
            next_poll_ms: batch.next_poll_ms,
            notice: batch.notice,
            value_schema: batch.value_schema,
        })
    }
}

fn record(r: SourceRecord) -> wit::SourceRecord {
    wit::SourceRecord { key: r.key.map(span), value: r.value.map(span), headers: span(r.headers), timestamp_ms: r.timestamp_ms }
}

fn span(s: Span) -> wit::Span {
    wit::Span { start: s.start, len: s.len }
}
