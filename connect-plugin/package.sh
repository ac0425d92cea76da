#!/usr/bin/env bash
# Lays the Kafka Connect plugin out in Confluent Hub's component layout and zips it (docs/kafka-connect.md):
#   package.sh --binary FILE --components DIR --trusted-key PUB --version V --out DIR
# gives DIR/snow-connect-servicenow-V/ and DIR/snow-connect-servicenow-V.zip:
#   manifest.json                       Confluent Hub's metadata, with the connector classes
#   lib/snow-connect-plugin.jar         the connector and task classes (the only jar: Connect's classpath)
#   bin/linux-<arch>/snow-connect       the executor: a real file, mode 0755 (Strimzi drops symlinks)
#   components/guest_{source,sink}.wasm with their Sigstore bundles
#   keys/<name>.pub                     the public key the operator file trusts
#   snow-connect.properties             the operator's settings, trusting that key
#   etc/                                example connector configurations
#   doc/                                README, LICENSE, the plugin's and the configuration's docs
# The zip is reproducible: entries sorted, every date SOURCE_DATE_EPOCH (default: the commit's time).
# Run from the checkout's root; the jar is target/connect/snow-connect-plugin.jar (make's $(CONNECT_JAR)).
set -euo pipefail
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) binary=$2 ;;
    --components) components=$2 ;;
    --trusted-key) trusted_key=$2 ;;
    --version) version=$2 ;;
    --out) out=$2 ;;
    *) echo "package.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift 2
done
: "${binary:?--binary}" "${components:?--components}" "${trusted_key:?--trusted-key}" "${version:?--version}" "${out:?--out}"
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}
name=snow-connect-servicenow-$version
dir=$out/$name
arch=$(uname -m)
case "$arch" in arm64) arch=aarch64 ;; esac
key_name=$(basename "$trusted_key")

rm -rf "$dir" "$dir.zip"
mkdir -p "$dir/lib" "$dir/bin/linux-$arch" "$dir/components" "$dir/keys" "$dir/etc" "$dir/doc"
cp target/connect/snow-connect-plugin.jar "$dir/lib/"
cp "$binary" "$dir/bin/linux-$arch/snow-connect"
chmod 0755 "$dir/bin/linux-$arch/snow-connect"
for w in guest_source guest_sink; do cp "$components/$w.wasm" "$components/$w.wasm.sigstore.json" "$dir/components/"; done
cp "$trusted_key" "$dir/keys/$key_name"
cat > "$dir/snow-connect.properties" <<PROPS
# The plugin operator's settings (docs/kafka-connect.md): the keys that may sign a component.
# The key the components of this archive were signed with.
component.trusted.keys=keys/$key_name
PROPS
cp README.md "$dir/doc/README.md"
cp docs/kafka-connect.md docs/configuration.md "$dir/doc/"
echo "snow-connect is licensed under the Apache License, Version 2.0: https://www.apache.org/licenses/LICENSE-2.0" > "$dir/doc/LICENSE"
cat > "$dir/etc/servicenow-source.json" <<'JSON'
{
  "name": "servicenow-incidents",
  "config": {
    "connector.class": "io.snowconnect.ServiceNowSourceConnector",
    "tasks.max": "4",
    "snow.instance.url": "https://acme.service-now.com",
    "snow.auth.username": "kafka.integration",
    "snow.auth.password": "${env:SNOW_PASSWORD}",
    "snow.tables": "incident,problem"
  }
}
JSON
cat > "$dir/etc/servicenow-sink.json" <<'JSON'
{
  "name": "servicenow-incident-writer",
  "config": {
    "connector.class": "io.snowconnect.ServiceNowSinkConnector",
    "tasks.max": "2",
    "topics": "incident-updates",
    "snow.instance.url": "https://acme.service-now.com",
    "snow.auth.username": "kafka.integration",
    "snow.auth.password": "${env:SNOW_PASSWORD}",
    "snow.sink.table": "incident"
  }
}
JSON
python3 - "$dir" "$version" <<'PY'
import datetime, json, os, sys
dir, version = sys.argv[1], sys.argv[2]
released = datetime.datetime.fromtimestamp(int(os.environ["SOURCE_DATE_EPOCH"]), datetime.timezone.utc).date().isoformat()
manifest = {
    "name": "servicenow",
    "version": version,
    "title": "snow-connect ServiceNow Source and Sink",
    "description": "ServiceNow Table API source (backfill, then continuous polling on a keyset cursor, deletes as tombstones) "
    "and sink (create, patch, put, delete), whose logic runs as signed WebAssembly components in a child process the plugin starts.",
    "owner": {"username": "snow-connect", "name": "snow-connect", "type": "organization"},
    "support": {"summary": "Community support through the project's issue tracker.", "provider_name": "snow-connect"},
    "tags": ["servicenow", "itsm", "table api", "source", "sink", "webassembly"],
    "features": {
        "supported_encodings": ["any"],
        "single_message_transforms": True,
        "confluent_control_center_integration": True,
        "kafka_connect_api": True,
        "delivery_guarantee": ["exactly_once", "at_least_once"],
    },
    "component_types": ["source", "sink"],
    "connector_classes": ["io.snowconnect.ServiceNowSourceConnector", "io.snowconnect.ServiceNowSinkConnector"],
    "requirements": ["Apache Kafka Connect 3.6 or later", "Linux on x86_64 (the executor in bin/ is a static binary)"],
    "license": [{"name": "Apache License 2.0", "url": "https://www.apache.org/licenses/LICENSE-2.0"}],
    "release_date": released,
}
with open(os.path.join(dir, "manifest.json"), "w") as f:
    json.dump(manifest, f, indent=2)
    f.write("\n")
PY
python3 release/zip.py "$dir" "$dir.zip"
echo "plugin: $dir ($(du -sh "$dir" | cut -f1)), $dir.zip"
