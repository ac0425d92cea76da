//! Composition for the second-host tests: `wac plug`, done in-process with `wac-graph` (the library
//! the `wac` CLI runs for that command, pinned to the release docs/hosts.md names).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use wac_graph::types::Package;
use wac_graph::{CompositionGraph, EncodeOptions};

/// `socket` with each of `plugs` plugged into its imports (as `wac plug` does), written to `out`.
pub fn plug(socket: &Path, plugs: &[&Path], out: &Path) {
    let mut graph = CompositionGraph::new();
    let read = |p: &Path| std::fs::read(p).unwrap_or_else(|e| panic!("reading {}: {e}", p.display()));
    let package =
        Package::from_bytes("socket", None, read(socket), graph.types_mut()).unwrap_or_else(|e| panic!("{}: {e:#}", socket.display()));
    let socket_id = graph.register_package(package).unwrap();
    let mut ids = Vec::new();
    for p in plugs {
        let stem = p.file_stem().unwrap().to_string_lossy();
        let package = Package::from_bytes(&format!("plug:{stem}"), None, read(p), graph.types_mut())
            .unwrap_or_else(|e| panic!("{}: {e:#}", p.display()));
        ids.push(graph.register_package(package).unwrap());
    }
    wac_graph::plug(&mut graph, ids, socket_id).unwrap_or_else(|e| panic!("plugging into {}: {e:#}", socket.display()));
    let bytes = graph.encode(EncodeOptions::default()).unwrap_or_else(|e| panic!("encoding {}: {e:#}", out.display()));
    std::fs::write(out, bytes).unwrap();
}

/// The connectors served over HTTP: the adapter with both connectors plugged in, then the host
/// shim under them, signed with the development key; in `target/hosts/<digest of the inputs>/`,
/// composed once per test binary (its tests run at once and share it).
pub fn composed_http_connector() -> PathBuf {
    static COMPOSED: OnceLock<PathBuf> = OnceLock::new();
    COMPOSED.get_or_init(compose).clone()
}

fn compose() -> PathBuf {
    let inputs = [guest_artifacts::HTTP_ADAPTER, guest_artifacts::GUEST_SOURCE, guest_artifacts::GUEST_SINK, guest_artifacts::HOST_SHIM];
    let mut all = Vec::new();
    for i in inputs {
        all.extend(std::fs::read(i).unwrap());
    }
    let digest: String = <sha2::Sha256 as sha2::Digest>::digest(&all).iter().take(6).map(|b| format!("{b:02x}")).collect();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../target/hosts/{digest}"));
    let out = dir.join("snow_http_connector.wasm");
    if !out.is_file() {
        std::fs::create_dir_all(&dir).unwrap();
        let step = dir.join(format!("adapter-with-connectors.{}.wasm", std::process::id()));
        let [adapter, source, sink, shim] = inputs.map(Path::new);
        plug(adapter, &[source, sink], &step);
        let partial = dir.join(format!("partial.{}.wasm", std::process::id()));
        plug(&step, &[shim], &partial);
        let key = snow_runtime::artefact::SigningKey::from_pem_file(Path::new(super::DEV_KEY)).unwrap();
        snow_runtime::artefact::sign_file(&partial, &key, Some(&PathBuf::from(format!("{}.sigstore.json", out.display())))).unwrap();
        std::fs::rename(&partial, &out).unwrap();
    }
    out
}
