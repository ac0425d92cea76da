//! Tools the second-host tests build once from crates.io into `target/tools/` (cached there like
//! the Kafka jars): `wac`, which composes components.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The wac release the tests pin.
pub const WAC_VERSION: &str = "0.12.0";

/// The `wac` binary, built on first use with `cargo install --locked`.
pub fn wac() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../target/tools/wac-{WAC_VERSION}-local"));
        let bin = root.join("bin/wac");
        if !bin.is_file() {
            eprintln!("building wac {WAC_VERSION} from crates.io (once; cached in {})", root.display());
            let status = Command::new(env!("CARGO"))
                // Without the registry client (plugging local files needs none): a third less to build.
                .args(["install", "wac-cli", "--version", WAC_VERSION, "--locked", "--no-default-features", "--root"])
                .arg(&root)
                .env_remove("CARGO_TARGET_DIR")
                .status()
                .unwrap();
            assert!(status.success(), "cargo install wac-cli {WAC_VERSION} failed");
        }
        bin
    })
}

/// `socket` with each of `plugs` plugged into its imports (`wac plug`), written to `out`.
pub fn plug(socket: &Path, plugs: &[&Path], out: &Path) {
    let mut cmd = Command::new(wac());
    cmd.arg("plug").arg(socket);
    for p in plugs {
        cmd.arg("--plug").arg(p);
    }
    let output = cmd.arg("-o").arg(out).output().unwrap();
    assert!(output.status.success(), "wac plug {}: {}", socket.display(), String::from_utf8_lossy(&output.stderr));
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
