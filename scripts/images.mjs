// `npm run images [-- DIR]`: the executor's and the node agent's images (Dockerfile, deploy/agent/Dockerfile) built
// without Docker, as OCI archives in DIR (build/images by default), from Debian's packages and this build
// (packages/lab/src/install/runtime-images.ts); an archive whose inputs did not change is kept. Needs root (the files'
// owners), umoci, apt-get and dpkg-deb. Load one with `ctr images import` or `skopeo copy oci-archive:FILE ...`.
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createLogger } from '../dist/core/logger.js';
import { KrError } from '../dist/core/errors.js';
import { ensureRuntimeImages } from '../packages/lab/dist/install/runtime-images.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const dir = resolve(process.argv[2] ?? `${root}/build/images`);
const log = createLogger((level, msg) => console.error(`${level}: ${msg}`));
try {
  for (const img of await ensureRuntimeImages({ log }, dir)) console.log(`${img.recipe.name}\t${img.ref}\t${img.archive}`);
} catch (e) {
  if (!(e instanceof KrError)) throw e;
  console.error(`error: ${e.message}`);
  process.exitCode = 2;
}
