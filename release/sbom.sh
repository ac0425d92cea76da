#!/usr/bin/env bash
# CycloneDX SBOMs of the release (cargo-cyclonedx, built once into target/tools): sbom.sh <out dir>
#   snow-connect.cdx.json   the x86_64 binary with the release's features (`static`)
#   snow-connect-aarch64.cdx.json   the aarch64 binary (the same crates but for target-only ones)
#   guest_source.cdx.json, guest_sink.cdx.json   each component (wasm32-wasip2)
# Every dependency the build resolves, with its version, licence, and hashes from Cargo.lock;
# SOURCE_DATE_EPOCH dates them (the same lock file gives the same SBOM).
set -euo pipefail
out=$1
tool=target/tools/cargo-cyclonedx-0.5.9/bin/cargo-cyclonedx
if [ ! -x "$tool" ]; then
  cargo install cargo-cyclonedx --version 0.5.9 --locked --root target/tools/cargo-cyclonedx-0.5.9
fi
mkdir -p "$out"
# cargo-cyclonedx writes one SBOM beside every workspace member's Cargo.toml: the wanted one is
# moved out, the others removed (none may stay in the source tree).
sbom() { # <manifest> <target> <name> [features]
  local dir
  dir=$(dirname "$1")
  "$tool" cyclonedx --manifest-path "$1" --format json --spec-version 1.5 --target "$2" ${4:+--features "$4"} \
    --override-filename "$3.cdx" -q
  mv "$dir/$3.cdx.json" "$out/$3.cdx.json"
  find . \( -name target -o -name .git \) -prune -o -type f -name "$3.cdx.json" -exec rm -f {} +
}
sbom host-runner/snow-connect/Cargo.toml x86_64-unknown-linux-musl snow-connect static
sbom host-runner/snow-connect/Cargo.toml aarch64-unknown-linux-musl snow-connect-aarch64 static
sbom guest-source/Cargo.toml wasm32-wasip2 guest_source
sbom guest-sink/Cargo.toml wasm32-wasip2 guest_sink
ls "$out"
