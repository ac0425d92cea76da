//! A fake ServiceNow instance for tests and the demo, reachable over real HTTP.
//!
//! It serves the Table API (list, get, create, patch, put, delete) and the Batch API ([`batch`]) over in-memory tables with the
//! encoded-query subset in `shared/servicenow-facts.md` (`ORDERBY` included), `sysparm_fields`,
//! `sysparm_limit`, `sysparm_offset`, `sysparm_display_value`; system fields set from a
//! controllable clock; the `Date` header; ServiceNow's error envelope; Basic auth and an OAuth
//! token endpoint. Under `/__fake/` an admin API seeds rows, moves the clock, injects faults and
//! reads a request journal with the most requests ever in flight ([`admin`]). Sessions are kept as the
//! instance keeps them ([`session`]); a latency model makes it as slow as an instance for benchmarks.
//! Like an instance, a write's `comments` and `work_notes` become rows of `sys_journal_field`
//! (`name`, `element`, `element_id`, `value`, readable and hideable like any table's rows), and
//! database views (`PUT /__fake/views/{t}`) carry no system fields; attachments are listed in
//! `sys_attachment` and served by `/api/now/attachment/{sys_id}/file` ([`attachment`]).
//!
//! Use it as a library ([`FakeSnow::start`] binds 127.0.0.1 on a free port and runs on its own
//! thread) or as the `fake-snow` binary. It shares no code with snow-connect, so a bug in the
//! connector's parsing or time handling cannot hide behind the same bug here.

pub mod admin;
pub mod attachment;
pub mod audit;
pub mod batch;
pub mod clock;
pub mod faults;
pub mod journal;
pub mod oauth;
pub mod push;
pub mod query;
pub mod rate_limit;
pub mod seed;
pub mod served;
pub mod server;
pub mod session;
pub mod store;
pub mod table_api;
pub mod time;

pub use clock::Clock;
pub use faults::{Fault, FaultAction};
pub use journal::{Journal, JournalEntry};
pub use server::{FakeOptions, FakeSnow};
pub use store::Store;
