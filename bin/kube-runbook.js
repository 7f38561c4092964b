#!/usr/bin/env node
// Entry point of kube-runbook; also works when symlinked as `kubectl-runbook` (kubectl plugin).
import { main } from '../dist/cli/main.js';

await main(process.argv);
