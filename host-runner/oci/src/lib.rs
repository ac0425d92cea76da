//! Components in OCI registries (ADR 0042): `snow-connect artefact push|pull` and
//! `component.ref=oci://registry/repository[:tag][@sha256:…]` in connector files and fleets.
//!
//! - [`reference`]: what an `oci://` reference names;
//! - [`artifact`]: the Wasm OCI artifact layout and the bundle referrer;
//! - [`client`]: the distribution API over the process's transport, [`auth`] its credentials;
//! - [`store`]: fetched artefacts kept locally, checked against their digests;
//! - [`resolve`]: a reference to a verified local file, and a connector's references rewritten
//!   to files ([`standalone`]: a run's connector files); [`push`]: the other way;
//!   [`settings`]: `component.registry.*`.
//!
//! What this crate does not own: verifying signatures and compiling (snow-runtime's `artefact`
//! and `component`: an `oci://` component is checked exactly as a file with its bundle is).

pub mod artifact;
pub mod auth;
pub mod client;
pub mod push;
pub mod reference;
pub mod resolve;
pub mod settings;
pub mod standalone;
pub mod store;

pub use reference::Reference;
pub use resolve::{Resolved, Resolver, resolve_entries};
pub use settings::Settings;
