#!/usr/bin/env bash
# static-check.sh <binary>: fails unless <binary> is static — no program interpreter, no shared
# library needed (read from the ELF headers: ldd exits 0 on a static-pie, so it is not asked).
set -euo pipefail
binary=$1
if readelf -l "$binary" | grep -qi 'program interpreter' || readelf -d "$binary" | grep -q NEEDED; then
  echo "release: $binary is dynamically linked:" >&2
  readelf -l -d "$binary" | grep -i -e 'program interpreter' -e NEEDED >&2
  exit 1
fi
