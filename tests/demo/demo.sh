#!/usr/bin/env bash
# make demo: a fake ServiceNow seeded with 5,000 incidents, a local Apache Kafka broker, and
# snow-connect running a source (incident -> topic snow.incident) and a sink (topic
# demo.new-incidents -> incident) for DEMO_SECONDS. The 500 incidents the sink creates are read
# back by the source, so the topic ends with 5,500 distinct incidents.
set -euo pipefail
cd "$(dirname "$0")/../.."

DEMO_SECONDS="${DEMO_SECONDS:-30}"
BIN="${SNOW_BIN_DIR:-target/debug}"
WORK=target/demo
SEEDED=5000
CREATED=500
rm -rf "$WORK" && mkdir -p "$WORK"

FAKE_PID=""
cleanup() {
  [ -n "$FAKE_PID" ] && kill "$FAKE_PID" 2>/dev/null || true
  "$BIN/kafka-harness" down --dir "$WORK/kafka" >/dev/null 2>&1 || true
}
trap cleanup EXIT

echo "==> starting Apache Kafka (KRaft, single node)"
BOOTSTRAP=$("$BIN/kafka-harness" up --dir "$WORK/kafka")
echo "    broker at $BOOTSTRAP"

echo "==> starting fake ServiceNow with $SEEDED incidents"
"$BIN/fake-snow" --port 0 --port-file "$WORK/fake.port" --user demo:demo-password --seed "incident:$SEEDED" > "$WORK/fake.log" 2>&1 &
FAKE_PID=$!
for _ in $(seq 1 100); do [ -s "$WORK/fake.port" ] && break; sleep 0.1; done
[ -s "$WORK/fake.port" ] || { echo "fake-snow did not start:"; cat "$WORK/fake.log"; exit 1; }
FAKE_URL="http://127.0.0.1:$(cat "$WORK/fake.port")"
echo "    instance at $FAKE_URL"

echo "==> producing $CREATED new incidents to demo.new-incidents"
for i in $(seq 1 "$CREATED"); do
  printf '{"short_description":"Demo incident %d created through Kafka","urgency":"%d","category":"demo"}\n' "$i" $(( i % 3 + 1 ))
done > "$WORK/new-incidents.jsonl"
"$BIN/snow-connect" topic produce --bootstrap "$BOOTSTRAP" --topic demo.new-incidents --file "$WORK/new-incidents.jsonl"

cat > "$WORK/connectors.json" <<JSON
{
  "worker": {
    "kafka.bootstrap.servers": "$BOOTSTRAP",
    "snow.instance.url": "$FAKE_URL",
    "snow.auth.username": "demo",
    "snow.auth.password": "demo-password",
    "component.trusted.keys": "tests/keys/development-only.pub"
  },
  "connectors": [
    { "name": "incident-source", "config": {
        "component.path": "target/guests/wasm32-wasip2/wasm-release/guest_source.wasm",
        "offset.storage.file.filename": "$WORK/offsets.json",
        "snow.tables": "incident",
        "snow.batch.size": "1000",
        "snow.poll.interval.ms": "1000",
        "snow.safety.lag.seconds": "2" } },
    { "name": "incident-sink", "config": {
        "component.path": "target/guests/wasm32-wasip2/wasm-release/guest_sink.wasm",
        "topics": "demo.new-incidents",
        "snow.sink.table": "incident",
        "snow.sink.max.in.flight": "4",
        "reporter.result.topic.name": "demo.sink-results",
        "reporter.error.topic.name": "demo.sink-errors" } }
  ]
}
JSON

echo "==> running snow-connect for ${DEMO_SECONDS}s (log: $WORK/snow-connect.log)"
"$BIN/snow-connect" run "$WORK/connectors.json" --for-seconds "$DEMO_SECONDS" 2> "$WORK/snow-connect.log" | tee "$WORK/summary.txt"

ROWS=$(curl -sf "$FAKE_URL/__fake/tables/incident/count" | sed -E 's/.*"count":([0-9]+).*/\1/')
TOPIC=$("$BIN/snow-connect" topic count --bootstrap "$BOOTSTRAP" --topic snow.incident)
RECORDS=$(echo "$TOPIC" | sed -E 's/.*"records":([0-9]+).*/\1/')
KEYS=$(echo "$TOPIC" | sed -E 's/.*"distinct_keys":([0-9]+).*/\1/')
REPORTS=$("$BIN/snow-connect" topic count --bootstrap "$BOOTSTRAP" --topic demo.sink-results | sed -E 's/.*"records":([0-9]+).*/\1/')
echo
echo "==> what flowed"
echo "    ServiceNow incident table: $ROWS rows ($SEEDED seeded + $CREATED created by the sink)"
echo "    Kafka topic snow.incident: $RECORDS records, $KEYS distinct incidents"
echo "    Kafka topic demo.sink-results: $REPORTS outcome reports (one per record the sink wrote)"
if [ "$KEYS" -eq $((SEEDED + CREATED)) ] && [ "$ROWS" -eq $((SEEDED + CREATED)) ] && [ "$REPORTS" -ge "$CREATED" ]; then
  echo "    every incident made the round trip"
else
  echo "    not everything arrived within ${DEMO_SECONDS}s; run again with a larger DEMO_SECONDS" >&2
  exit 1
fi
