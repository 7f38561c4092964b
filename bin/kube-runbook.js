#!/usr/bin/env node
// Entry point of kube-runbook; also works when symlinked as `kubectl-runbook` (kubectl plugin).
//
// Plain JavaScript that any Node.js parses, and nothing imported before the version check: the CLI's dependencies
// fail at load time on an older Node (undici's first line), with a stack trace instead of a sentence. MIN_NODE is
// package.json's engines.node; test/node-version.test.ts checks the two agree.
const MIN_NODE = '22.19';

const [major, minor] = process.versions.node.split('.').map(Number);
const [needMajor, needMinor] = MIN_NODE.split('.').map(Number);
if (major < needMajor || (major === needMajor && minor < needMinor)) {
  process.stderr.write(
    `kube-runbook needs Node.js ${MIN_NODE} or newer; this is ${process.versions.node}. ` +
      'Upgrade Node.js (https://nodejs.org, or your package manager), or use the single executable, which brings its own (npm run package)\n',
  );
  process.exit(2);
}

// A checkout that was never built has no dist/: one line saying what to do, not ERR_MODULE_NOT_FOUND.
const { existsSync } = await import('node:fs');
const { join } = await import('node:path');
const { pathToFileURL } = await import('node:url');
const root = join(import.meta.dirname, '..');
const entry = join(root, 'dist', 'cli', 'main.js');
if (!existsSync(entry)) {
  process.stderr.write(`kube-runbook: ${root}/ is not built: run \`npm ci && npm run build\` there\n`);
  process.exit(2);
}

const { main } = await import(pathToFileURL(entry).href);
await main(process.argv);
