//! Where the release binaries and components are.

use std::path::PathBuf;

/// The workspace root.
pub fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A release binary of the workspace.
pub fn release_bin(name: &str) -> PathBuf {
    workspace().join("target/release").join(name)
}

/// The source component.
pub fn source_component() -> PathBuf {
    workspace().join("target/guests/wasm32-wasip2/wasm-release/guest_source.wasm")
}
