// How the command-line entries start (bin/kube-runbook.js, and the lab's packages/lab/bin/kube-runbook-lab.js).
//
// Plain JavaScript that any Node.js parses, and nothing imported before the version check: the CLIs' dependencies
// fail at load time on an older Node (undici's first line), with a stack trace instead of a sentence. MIN_NODE is
// package.json's engines.node; test/node-version.test.ts checks the two agree.
const MIN_NODE = '22.19';

/**
 * Runs `main(process.argv)` of dist/cli/main.js in the package whose bin/ holds the entry at `entryUrl` (its
 * import.meta.url). On a Node older than MIN_NODE, or when that package was never built (no dist/, as in a fresh
 * checkout), it says so in one line that starts with `name` instead, `upgrade` or `build` after it, and exits 2.
 *
 * @param {string} name
 * @param {string} entryUrl
 * @param {{ upgrade: string, build: string }} say
 */
export async function start(name, entryUrl, say) {
  const [major, minor] = process.versions.node.split('.').map(Number);
  const [needMajor, needMinor] = MIN_NODE.split('.').map(Number);
  if (major < needMajor || (major === needMajor && minor < needMinor)) {
    process.stderr.write(`${name} needs Node.js ${MIN_NODE} or newer; this is ${process.versions.node}${say.upgrade}\n`);
    process.exit(2);
  }
  const { existsSync } = await import('node:fs');
  const { dirname, join } = await import('node:path');
  const { fileURLToPath, pathToFileURL } = await import('node:url');
  const root = join(dirname(fileURLToPath(entryUrl)), '..');
  const entry = join(root, 'dist', 'cli', 'main.js');
  if (!existsSync(entry)) {
    process.stderr.write(`${name}: ${root}/ is not built: run \`npm ci && npm run build\` ${say.build}\n`);
    process.exit(2);
  }
  const { main } = await import(pathToFileURL(entry).href);
  await main(process.argv);
}
