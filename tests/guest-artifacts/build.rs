//! Builds the guest components for wasm32-wasip2 with a nested cargo into `target/guests` (its own
//! target dir: sharing the outer one deadlocks on cargo's lock, wasm-recipe.md §13), then exposes
//! their paths. `make wasm` runs the same command, so both share one build.
//! `SNOW_SKIP_GUEST_BUILD=1` skips the build (for rust-analyzer or host-only work).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::{env, fs};

const GUESTS: [(&str, &str); 8] = [
    ("GUEST_SOURCE", "guest-source"),
    ("GUEST_SINK", "guest-sink"),
    ("ROGUE_GUEST", "rogue-guest"),
    ("ROGUE_SINK", "rogue-sink"),
    ("HTTP_ADAPTER", "http-adapter"),
    ("HOST_SHIM", "host-shim"),
    ("TRANSFORM_EXPLODE", "transform-explode"),
    ("ROGUE_TRANSFORM", "rogue-transform"),
];

fn main() {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let workspace =
        manifest_dir.parent().and_then(Path::parent).expect("tests/guest-artifacts sits two levels below the workspace").to_path_buf();
    let target_dir = workspace.join("target").join("guests");
    let out_dir = target_dir.join("wasm32-wasip2").join("wasm-release");
    println!("cargo:rerun-if-env-changed=SNOW_SKIP_GUEST_BUILD");

    if env::var_os("SNOW_SKIP_GUEST_BUILD").is_none() {
        let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.current_dir(&workspace)
            .args(["build", "--target", "wasm32-wasip2", "--profile", "wasm-release", "--target-dir"])
            .arg(&target_dir);
        for (_, package) in GUESTS {
            cmd.args(["-p", package]);
        }
        for var in [
            "CARGO_ENCODED_RUSTFLAGS",
            "RUSTFLAGS",
            "CARGO_BUILD_TARGET",
            "CARGO_TARGET_DIR",
            "RUSTC_WORKSPACE_WRAPPER",
            "RUSTC_WRAPPER",
            "CARGO_BUILD_RUSTFLAGS",
        ] {
            cmd.env_remove(var);
        }
        // Share cargo's jobserver so the nested build does not oversubscribe the cores.
        if let Ok(flags) = env::var("CARGO_MAKEFLAGS") {
            cmd.env("MAKEFLAGS", flags);
        }
        let status = cmd.status().expect("running the nested cargo build of the guests");
        assert!(status.success(), "building the guest components failed (see the output above)");
    }

    let mut consts = String::new();
    for (name, package) in GUESTS {
        let stem = package.replace('-', "_");
        let wasm = out_dir.join(format!("{stem}.wasm"));
        track_dep_info(&out_dir.join(format!("{stem}.d")));
        consts.push_str(&format!("/// Path of the `{package}` component.\npub const {name}: &str = {:?};\n", wasm.display().to_string()));
    }
    // Built by the Makefile with ComponentizeJS (Node), not by cargo: `make test` builds it first.
    let label = workspace.join("target").join("transforms").join("transform_label.wasm");
    consts.push_str(&format!(
        "/// Path of the JavaScript example transform (examples/transform-js), built by `make test`.\npub const TRANSFORM_LABEL: &str = {:?};\n",
        label.display().to_string()
    ));
    println!("cargo:rerun-if-changed={}", workspace.join("wit").display());
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("paths.rs");
    fs::write(out, consts).expect("writing paths.rs");
}

/// Re-runs this script when any source the guest was built from changes.
fn track_dep_info(path: &Path) {
    let Ok(text) = fs::read_to_string(path) else { return };
    let deps = text.split_once(": ").map(|(_, deps)| deps).unwrap_or("");
    // Paths are space-separated with spaces inside paths escaped as `\ `.
    let mut current = String::new();
    let mut chars = deps.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&' ') => {
                current.push(' ');
                chars.next();
            }
            ' ' | '\n' => {
                if !current.is_empty() && !current.contains("/.cargo/registry/") {
                    println!("cargo:rerun-if-changed={current}");
                }
                current.clear();
            }
            '\\' if chars.peek() == Some(&'\n') => {}
            c => current.push(c),
        }
    }
    if !current.is_empty() && !current.contains("/.cargo/registry/") {
        println!("cargo:rerun-if-changed={current}");
    }
}
