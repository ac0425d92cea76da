#!/usr/bin/env bash
# The static binary for aarch64 (ARM servers, Graviton): aarch64.sh <target dir> <out file>
# Cross-built with Zig as the C and C++ compiler and linker driver (cargo-zigbuild; ziglang and
# cargo-zigbuild from PyPI, pinned, in target/tools/zig-venv): librdkafka (cmake), libcurl and
# OpenSSL from source for aarch64-linux-musl, as the x86_64 build does with musl-gcc. Checked to be
# static, then started under qemu-user (Debian's qemu-user-static) when it is installed.
set -euo pipefail
target_dir=$1
out=$2
triple=aarch64-unknown-linux-musl
venv=target/tools/zig-venv
if [ ! -x "$venv/bin/cargo-zigbuild" ] || [ ! -x "$venv/bin/python-zig" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q ziglang==0.17.0 cargo-zigbuild==0.24.0
fi
export PATH=$PWD/$venv/bin:$PATH
source release/remap.sh
cargo zigbuild --locked --release --target "$triple" -p snow-connect --features static \
  --target-dir "$target_dir" --config "build.rustflags=[$remap]"
cp "$target_dir/$triple/release/snow-connect" "$out"
bash release/static-check.sh "$out"
if command -v qemu-aarch64-static >/dev/null 2>&1; then
  qemu-aarch64-static "$out" --version
else
  echo "release: qemu-aarch64-static is not installed; $out was not started" >&2
fi
