//! Everything about running guest components: the generated bindings ([`bindings`]), the engine,
//! linker and loading with an import allow-list ([`runtime`]), and the per-store state with its
//! limits, logging and outbound gate ([`state`]); compiled components are kept across starts
//! ([`cache`]); a running connector's component is replaced at its units' batch boundaries
//! ([`swap`]).
//!
//! One engine and one linker per process; one pre-instantiated component per artefact; a fresh
//! store per unit, recreated after any trap.

pub mod bindings;
pub mod cache;
pub mod inspect;
pub mod runtime;
pub mod state;
mod stderr;
pub mod swap;
pub mod transform;
pub mod trap;

pub use runtime::{ComponentKind, ComponentRuntime, Loaded};
pub use state::{HostState, StoreOptions};
