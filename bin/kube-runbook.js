#!/usr/bin/env node
// Entry point of kube-runbook; also works when symlinked as `kubectl-runbook` (kubectl plugin). bin/start.js checks
// the Node.js version before anything else is loaded, and that this checkout was built.
import { start } from './start.js';

await start('kube-runbook', import.meta.url, {
  upgrade:
    '. Upgrade Node.js (https://nodejs.org, or your package manager), or use the single executable, which brings its own (npm run package)',
  build: 'there',
});
