#!/usr/bin/env node
// Entry point of the lab (`kube-runbook-lab up`, `down`, `status`, `install`, `demo` ...). Needs Node.js 22.19 or
// newer, as kube-runbook does: its first line is the same check, and a checkout that was never built says so.
const MIN_NODE = '22.19';

const [major, minor] = process.versions.node.split('.').map(Number);
const [needMajor, needMinor] = MIN_NODE.split('.').map(Number);
if (major < needMajor || (major === needMajor && minor < needMinor)) {
  process.stderr.write(`kube-runbook-lab needs Node.js ${MIN_NODE} or newer; this is ${process.versions.node}\n`);
  process.exit(2);
}

const { existsSync } = await import('node:fs');
const { join } = await import('node:path');
const { pathToFileURL } = await import('node:url');
const root = join(import.meta.dirname, '..');
const entry = join(root, 'dist', 'cli', 'main.js');
if (!existsSync(entry)) {
  process.stderr.write(`kube-runbook-lab: ${root}/ is not built: run \`npm ci && npm run build\` in the repository's root\n`);
  process.exit(2);
}

const { main } = await import(pathToFileURL(entry).href);
await main(process.argv);
