//! The OCI registry the tests start (tests/registry: go-containerregistry's registry with the
//! referrers API, and in front of it the token authentication of real registries when a user is
//! given), built once per test binary with the Go toolchain from the Go module proxy, on
//! 127.0.0.1 with a free port; stopped when dropped. Its log has one line per request with the
//! kind of credential it carried (never the credential), and `wkg` (the Wasm package tool, from
//! crates.io) is built on first use for the interoperability test.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;

/// The registry binary (built on first use into target/tools; Go's build cache makes a rebuild
/// of unchanged sources a second).
fn binary() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/registry");
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/tools/test-registry");
        std::fs::create_dir_all(&dir).unwrap();
        let staging = dir.join(format!("registry.{}", std::process::id()));
        let out = Command::new("go")
            .args(["build", "-o"])
            .arg(&staging)
            .arg(".")
            .current_dir(&source)
            .env("GOFLAGS", "-buildvcs=false")
            .output()
            .unwrap_or_else(|e| panic!("running `go build` for the test registry: {e} (Go 1.26 or later: tests/setup.sh checks it)"));
        assert!(out.status.success(), "building the test registry failed:\n{}", String::from_utf8_lossy(&out.stderr));
        let bin = dir.join("registry");
        std::fs::rename(&staging, &bin).unwrap();
        bin
    })
}

/// A running registry.
pub struct Registry {
    child: Child,
    /// `127.0.0.1:<port>`: the registry's name in references.
    pub address: String,
    log: PathBuf,
}

impl Registry {
    /// Starts one in `dir`; with `user`, every request needs a token from its token service,
    /// which needs that user and `password`; `referrers` false leaves the referrers API out.
    pub fn start(dir: &Path, user: Option<(&str, &str)>, referrers: bool) -> Self {
        let log = dir.join(format!("registry-{}.log", super::unique("r")));
        let mut command = Command::new(binary());
        command.arg("-log").arg(&log).arg(format!("-referrers={referrers}"));
        if let Some((user, password)) = user {
            command.args(["-user", user, "-password", password]);
        }
        let mut child = command.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().expect("starting the test registry");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let address = line.trim().strip_prefix("listening on ").unwrap_or_else(|| panic!("the registry said {line:?}")).to_string();
        Self { child, address, log }
    }

    /// The requests so far: `METHOD PATH auth=<scheme>` lines.
    pub fn requests(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Stops it (its address then refuses connections).
    pub fn stop(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A registry credentials file (the `docker login` format) in `dir` for `registry`.
pub fn auth_file(dir: &Path, registry: &str, user: &str, password: &str) -> PathBuf {
    use base64::Engine as _;
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    let path = dir.join("registry-auth.json");
    std::fs::write(&path, format!(r#"{{"auths":{{"{registry}":{{"auth":"{auth}"}}}}}}"#)).unwrap();
    path
}

/// The wkg release the interoperability test pins.
pub const WKG_VERSION: &str = "0.16.1";

/// The `wkg` binary, built once from crates.io into `target/tools/wkg-<version>/` (about three
/// minutes on two cores).
pub fn wkg() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let tools = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/tools");
        let root = tools.join(format!("wkg-{WKG_VERSION}"));
        let bin = root.join("bin/wkg");
        if bin.is_file() {
            return bin;
        }
        let staging = tools.join(format!("wkg-{WKG_VERSION}.partial"));
        let build = tools.join("wkg-build");
        let _ = std::fs::remove_dir_all(&staging);
        eprintln!("building wkg {WKG_VERSION} from crates.io (once; cached in {})", root.display());
        let out = Command::new("cargo")
            .args(["install", "wkg", "--version", WKG_VERSION, "--locked", "--root"])
            .arg(&staging)
            .arg("--target-dir")
            .arg(&build)
            .output()
            .unwrap();
        assert!(out.status.success(), "cargo install wkg {WKG_VERSION} failed:\n{}", String::from_utf8_lossy(&out.stderr));
        let _ = std::fs::remove_dir_all(&build);
        let _ = std::fs::remove_dir_all(&root);
        std::fs::rename(&staging, &root).unwrap();
        bin
    })
}

/// Runs `wkg args` with `dir` as its home (no credentials or configuration of the machine's);
/// returns whether it succeeded and what it printed.
pub fn run_wkg(dir: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new(wkg())
        .args(args)
        .current_dir(dir)
        .env("HOME", dir)
        .env("XDG_CONFIG_HOME", dir.join(".config"))
        .env("XDG_CACHE_HOME", dir.join(".cache"))
        .env_remove("DOCKER_CONFIG")
        .output()
        .unwrap();
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}
