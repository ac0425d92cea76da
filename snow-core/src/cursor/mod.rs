//! The keyset cursor: a total order on `(timestamp to the second, sys_id)` and the sweep that walks
//! a table along it (`sysparm_offset` only to cross rows hidden by ACLs inside one sweep).
//!
//! [`position`] names a table's stream ([`Partition`]) and a place in it ([`Cursor`]); [`sweep`]
//! chooses the next query (*drain the current second* or *next seconds up to the high-water mark*)
//! and checks every page against the cursor; [`window`] sizes each request and crosses rows hidden
//! by ACLs; [`plan`] assigns tables to tasks.

pub mod dedup;
pub mod plan;
pub mod position;
pub mod sweep;
pub mod window;

pub use position::{Cursor, Partition, SeenVersion};
pub use sweep::{Answer, Hidden, Sweep, SweepRequest, SweepStep};
pub use window::{Window, WindowSizes};
