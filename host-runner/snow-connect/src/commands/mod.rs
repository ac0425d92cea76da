//! One module per command of `snow-connect` (its arguments, what it prints, its exit status).

pub mod artefact;
pub mod component;
pub mod inspect;
pub mod migrate;
pub mod offsets;
pub mod run;
pub mod task_executor;
pub mod topic;
pub mod worker;
