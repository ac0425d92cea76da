// Builds label.js into a WASI 0.2 component of world `transform` with ComponentizeJS:
//   node build.mjs <out.wasm> [--modules <node_modules dir>]
// (`npm install` here first, or point --modules at an installation of the same packages; the
// project's Makefile uses tests/hosts/jco's). Nothing but the `transform` world's imports is
// left in: no stdio, clocks, random or network.
import { resolve, join, dirname } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { readFile, writeFile, mkdir, mkdtemp, copyFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';

const here = dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const out = resolve(args[0] ?? 'label.wasm');
const at = args.indexOf('--modules');
const modules = resolve(at >= 0 ? args[at + 1] : join(here, 'node_modules'));
const load = (p) => import(pathToFileURL(join(modules, p)).href);

// preview2-shim 0.26 starts with no preopens: ComponentizeJS's tools read the WIT and the source
// through WASI, so give them the file system.
const fs = await load('@bytecodealliance/preview2-shim/dist/nodejs/filesystem.js');
fs._setPreopens({ '/': '/' });
// ComponentizeJS 0.19.3: 0.22.0's components leak memory on every call that returns a string
// (bytecodealliance/ComponentizeJS#350), so a long-running transform would reach its memory limit.
const { componentize } = await load('@bytecodealliance/componentize-js-0-19-3/src/componentize.js');
// The `transform` world needs no WASI package: give ComponentizeJS only its files (0.19.3's WIT
// parser does not read the newer WASI packages under wit/deps that the connector worlds use).
const wit = resolve(here, '../../wit');
const only = await mkdtemp(join(tmpdir(), 'snow-transform-wit-'));
for (const file of ['types.wit', 'host.wit', 'transform.wit']) await copyFile(join(wit, file), join(only, file));
await writeFile(
  join(only, 'world.wit'),
  'package snow:connector@0.2.0;\n\nworld transform {\n    import host;\n    export transform-api;\n}\n',
);
const source = await readFile(join(here, 'label.js'), 'utf8');
let component;
try {
  ({ component } = await componentize(source, {
    sourceName: 'label.js',
    witPath: only,
    worldName: 'transform',
    disableFeatures: ['stdio', 'random', 'clocks', 'http', 'fetch-event'],
  }));
} finally {
  await rm(only, { recursive: true, force: true });
}
await mkdir(dirname(out), { recursive: true });
await writeFile(`${out}.partial`, component);
await (await import('node:fs/promises')).rename(`${out}.partial`, out);
console.log(`built ${out} (${component.length} bytes)`);
