#!/usr/bin/env bash
# Lays the Kafka Connect plugin out as plugin.path takes it, and zips it:
#   package.sh <snow-connect binary> <plugin dir>
# <plugin dir>/snow-connect-plugin.jar, bin/<os>-<arch>/snow-connect, components/guest_{source,sink}.wasm
# with their Sigstore bundles, keys/ and the operator's snow-connect.properties (docs/kafka-connect.md).
# The components come signed with the DEVELOPMENT key (make wasm) and the operator file trusts it:
# for trying the plugin out; a release replaces both with its own key.
set -euo pipefail
binary=$1
dir=$2
guests=target/guests/wasm32-wasip2/wasm-release
arch=$(uname -m)
case "$arch" in arm64) arch=aarch64 ;; esac
rm -rf "$dir" "$dir.zip"
mkdir -p "$dir/bin/linux-$arch" "$dir/components" "$dir/keys"
cp target/connect/snow-connect-plugin.jar "$dir/"
cp "$binary" "$dir/bin/linux-$arch/snow-connect"
for w in guest_source guest_sink; do cp "$guests/$w.wasm" "$guests/$w.wasm.sigstore.json" "$dir/components/"; done
cp tests/keys/development-only.pub "$dir/keys/"
cat > "$dir/snow-connect.properties" <<PROPS
# The plugin operator's settings (docs/kafka-connect.md): the keys that may sign a component.
# DEVELOPMENT key: replace it with your release key before running real data.
component.trusted.keys=keys/development-only.pub
PROPS
(cd "$(dirname "$dir")" && python3 -m zipfile -c "$(basename "$dir").zip" "$(basename "$dir")")
echo "plugin: $dir ($(du -sh "$dir" | cut -f1)), $dir.zip"
