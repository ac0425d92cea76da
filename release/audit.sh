#!/usr/bin/env bash
# `make audit`: the dependency tree (Cargo.lock: the host, the components, the tests' tools) against
# the RustSec advisory database, offline, from the snapshot committed beside this script
# (release/advisory-db.tar.gz; release/README.md says how to refresh it). cargo-audit is built once
# into target/tools. Fails on any advisory (vulnerability, unsound, unmaintained, yanked crates
# aside: the snapshot cannot tell) not addressed in .cargo/audit.toml's ignore list (cargo-audit
# reads it), where each exception says why it does not apply.
set -euo pipefail
cd "$(dirname "$0")/.."
tool=target/tools/cargo-audit-0.22.2/bin/cargo-audit
if [ ! -x "$tool" ]; then
  cargo install cargo-audit --version 0.22.2 --locked --root target/tools/cargo-audit-0.22.2
fi
db=target/advisory-db
snapshot=release/advisory-db.tar.gz
if [ ! -f "$db/.snapshot" ] || [ "$(cat "$db/.snapshot")" != "$(sha256sum "$snapshot" | cut -d' ' -f1)" ]; then
  rm -rf "$db" && mkdir -p target
  tar -xzf "$snapshot" -C target
  sha256sum "$snapshot" | cut -d' ' -f1 > "$db/.snapshot"
fi
echo "advisory database: $(sed -n 's/^snapshot: //p' release/README.md)"
"$tool" audit --db "$db" --no-fetch --stale --no-yanked --deny warnings "$@"
