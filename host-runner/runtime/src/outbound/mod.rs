//! The outbound gate: every HTTP request a guest makes passes here, and goes out on the
//! process's keep-alive connection pool ([`crate::transport`]), where the host's own requests
//! (OAuth tokens, the schema registry) go out too.
//!
//! It allows only the connector's configured instance (scheme and authority), attaches the
//! credentials the host holds (guests may not set `Authorization` or `Cookie` themselves), caps
//! requests in flight per instance host across every connector of the process, clamps timeouts,
//! keeps each store's ServiceNow sessions apart ([`session`]), and logs each refusal. Retry policy is not here: it depends on the request's meaning and stays
//! in the guest.

mod budget;
mod gate;
mod limiter;
mod session;

pub use budget::{BudgetRegistry, DEFAULT_PRIORITY, InstanceBudget};
pub use gate::{Gate, GateSettings, MAX_REQUEST_BODY};
pub use limiter::{InstanceLimiter, LimiterRegistry};
