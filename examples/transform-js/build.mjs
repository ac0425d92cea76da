// Builds label.js into a WASI 0.2 component of world `transform` with ComponentizeJS:
//   node build.mjs <out.wasm> [--modules <node_modules dir>]
// (`npm install` here first, or point --modules at an installation of the same packages; the
// project's Makefile uses tests/hosts/jco's). Nothing but the `transform` world's imports is
// left in: no stdio, clocks, random or network.
import { resolve, join, dirname } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { readFile, writeFile, mkdir } from 'node:fs/promises';

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
const { componentize } = await load('@bytecodealliance/componentize-js/src/componentize.js');
const source = await readFile(join(here, 'label.js'), 'utf8');
const { component } = await componentize(source, {
  sourceName: 'label.js',
  witPath: resolve(here, '../../wit'),
  worldName: 'transform',
  disableFeatures: ['stdio', 'random', 'clocks', 'http', 'fetch-event'],
});
await mkdir(dirname(out), { recursive: true });
await writeFile(`${out}.partial`, component);
await (await import('node:fs/promises')).rename(`${out}.partial`, out);
console.log(`built ${out} (${component.length} bytes)`);
