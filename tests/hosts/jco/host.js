// snow:connector/host for a host that is not snow-connect (jco transpile --map snow:connector/host=…/host.js):
// log lines go to stderr as JSON, metrics are counted in memory.
export const metrics = new Map();
export function log(level, message) {
  process.stderr.write(JSON.stringify({ level, message }) + "\n");
}
export function counterAdd(name, delta, labels) {
  const key = name + JSON.stringify(labels);
  metrics.set(key, (metrics.get(key) ?? 0n) + BigInt(delta));
}
export function gaugeSet(name, value, labels) {
  metrics.set(name + JSON.stringify(labels), value);
}
