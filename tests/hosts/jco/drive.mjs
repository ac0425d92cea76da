// Drives the transpiled connector components from Node (jco + preview2-shim): a WASI host that
// is not snow-connect. One JSON line per record (source) or outcome (sink) on stdout.
//   node drive.mjs source <transpiled dir> <config.json> <expected records>
//   node drive.mjs sink   <transpiled dir> <config.json> <records.json>
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import path from "node:path";

const [mode, dir, configFile, arg] = process.argv.slice(2);
const config = Object.entries(JSON.parse(readFileSync(configFile, "utf8"))).map(([key, value]) => ({ key, value }));
const b64 = (bytes) => Buffer.from(bytes).toString("base64");
const out = (value) => process.stdout.write(JSON.stringify(value, (_, v) => (typeof v === "bigint" ? Number(v) : v)) + "\n");
const fail = (what, e) => {
  process.stderr.write(`${what}: ${JSON.stringify(e?.payload ?? String(e))}\n`);
  process.exit(1);
};

const mod = await import(pathToFileURL(path.resolve(dir, `guest_${mode}.js`)).href);
if (mode === "source") {
  const api = mod.sourceApi;
  try { api.validate(config); } catch (e) { fail("validate", e); }
  let units;
  try { units = api.plan(config, 1).flatMap((t) => t.units); } catch (e) { fail("plan", e); }
  const expected = Number(arg);
  let produced = 0;
  for (const unit of units) {
    const task = api.SourceTask.open(unit.config, []);
    let idle = 0;
    while (produced < expected && idle < 3) {
      let batch;
      try { batch = task.poll(); } catch (e) { fail("poll", e); }
      const bytes = Buffer.concat([Buffer.from(batch.data), Buffer.from(batch.extra)]);
      const span = (s) => bytes.subarray(s.start, s.start + s.len);
      for (const r of batch.records) {
        const own = batch.recordHeaders.slice(r.headers.start, r.headers.start + r.headers.len);
        out({
          topic: batch.topic,
          key: r.key ? b64(span(r.key)) : null,
          value: r.value ? b64(span(r.value)) : null,
          headers: [...batch.headers.map((h) => [h.key, b64(h.value)]), ...own.map((h) => [span(h.key).toString(), b64(span(h.value))])],
          timestamp_ms: r.timestampMs,
        });
      }
      produced += batch.records.length;
      idle = batch.records.length === 0 ? idle + 1 : 0;
    }
  }
} else {
  const api = mod.sinkApi;
  try { api.validate(config); } catch (e) { fail("validate", e); }
  const records = JSON.parse(readFileSync(arg, "utf8")).map((r) => ({
    topic: r.topic,
    partition: r.partition,
    offset: BigInt(r.offset),
    key: r.key === null ? undefined : Buffer.from(r.key, "base64"),
    value: r.value === null ? undefined : Buffer.from(r.value, "base64"),
    headers: r.headers.map(([key, value]) => ({ key, value: Buffer.from(value, "base64") })),
    timestampMs: r.timestamp_ms === null ? undefined : BigInt(r.timestamp_ms),
  }));
  const task = api.SinkTask.open(config);
  for (const outcome of task.put(records)) out(outcome);
}
