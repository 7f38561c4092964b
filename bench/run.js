// `npm run bench [-- NAME...]`: runs every bench/*.bench.js (or those named), one after another, each in its own
// process with this Node; each prints its section of BENCHMARKS.md. Paste the sections there with the date.
/* global URL */
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const dir = fileURLToPath(new URL('.', import.meta.url));
const wanted = process.argv.slice(2);
const all = readdirSync(dir)
  .filter((f) => f.endsWith('.bench.js'))
  .sort();
const chosen = wanted.length ? all.filter((f) => wanted.some((w) => f.startsWith(w))) : all;
if (!chosen.length) {
  console.error(`no benchmark matches ${wanted.join(', ')} (have: ${all.join(', ')})`);
  process.exit(2);
}
let failed = 0;
for (const f of chosen) {
  console.log(`\n<!-- ${f} -->`);
  const r = spawnSync(process.execPath, [fileURLToPath(new URL(f, import.meta.url))], { stdio: 'inherit' });
  if (r.status !== 0) {
    failed++;
    console.error(`${f} failed (exit ${r.status})`);
  }
}
process.exit(failed ? 1 : 0);
