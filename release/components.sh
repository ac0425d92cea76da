#!/usr/bin/env bash
# Builds the release's components reproducibly: components.sh <target dir> <out dir>
# guest_source.wasm and guest_sink.wasm (wasm-release profile) with every path inside them
# remapped (this checkout to /snow-connect, the cargo home to /cargo), so two clean builds of one
# commit in different directories give the same SHA-256 (make release-test builds a second copy
# elsewhere and compares). Run from the checkout's root.
set -euo pipefail
target_dir=$1
out=$2
source release/remap.sh
# Added to .cargo/config.toml's flags for the target (cargo joins the two lists).
cargo build --locked --target wasm32-wasip2 --profile wasm-release -p guest-source -p guest-sink \
  --target-dir "$target_dir" --config "target.wasm32-wasip2.rustflags=[$remap]"
mkdir -p "$out"
for w in guest_source guest_sink; do
  cp "$target_dir/wasm32-wasip2/wasm-release/$w.wasm" "$out/$w.wasm"
done
(cd "$out" && sha256sum guest_source.wasm guest_sink.wasm)
