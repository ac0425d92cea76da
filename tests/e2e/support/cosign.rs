//! The `cosign` CLI for the interoperability tests: built once from its Go module through the Go
//! module proxy into `target/tools/cosign-<version>/` (cached there like the Kafka jars), never
//! downloaded as a binary. Every call runs offline: no transparency log, no signing config, no
//! TUF, and its home is a directory of the test.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The cosign release the tests pin.
pub const VERSION: &str = "v3.1.3";

/// The cosign binary, built on first use.
pub fn binary() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../target/tools/cosign-{VERSION}"));
        let bin = dir.join("cosign");
        if bin.is_file() {
            return bin;
        }
        let staging = dir.with_extension("partial");
        let _ = std::fs::remove_dir_all(&staging);
        std::fs::create_dir_all(&staging).unwrap();
        eprintln!("building cosign {VERSION} from its Go module (once; cached in {})", dir.display());
        let out = Command::new("go")
            .args(["install", &format!("github.com/sigstore/cosign/v3/cmd/cosign@{VERSION}")])
            .env("GOBIN", &staging)
            .env("GOFLAGS", "-buildvcs=false")
            .output()
            .unwrap_or_else(|e| panic!("running `go install` for cosign: {e} (Go 1.26 or later is needed: tests/setup.sh checks it)"));
        assert!(out.status.success(), "go install cosign {VERSION} failed:\n{}", String::from_utf8_lossy(&out.stderr));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::rename(&staging, &dir).unwrap();
        bin
    })
}

/// Runs cosign with `args` in `dir` (its home, so nothing outside the test is read or written);
/// returns whether it succeeded and what it printed (stdout and stderr).
pub fn run(dir: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new(binary())
        .args(args)
        .current_dir(dir)
        .env("HOME", dir)
        .env("COSIGN_PASSWORD", "interop-test-password")
        .env("COSIGN_EXPERIMENTAL", "0")
        .env("SIGSTORE_NO_CACHE", "1")
        .output()
        .unwrap();
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}
