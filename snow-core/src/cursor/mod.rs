//! The keyset cursor: a total order on `(timestamp to the second, sys_id)` and the sweep that walks
//! a table along it without `sysparm_offset`.
//!
//! [`position`] names a table's stream ([`Partition`]) and a place in it ([`Cursor`]); [`sweep`]
//! chooses the next query (*drain the current second* or *next seconds up to the high-water mark*)
//! and checks every page against the cursor; [`plan`] assigns tables to tasks.

pub mod dedup;
pub mod plan;
pub mod position;
pub mod sweep;

pub use position::{Cursor, Partition};
pub use sweep::{Sweep, SweepStep};
