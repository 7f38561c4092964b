#!/usr/bin/env node
// `kubectl runbook <TAB>`: kubectl (1.26 and later) asks an executable `kubectl_complete-runbook` on PATH for a
// plugin's completions, as `kubectl_complete-runbook __complete WORDS...`, and reads Cobra's answer. This asks
// kube-runbook's own completion for it (`__complete --cobra -- WORDS...`), through kube-runbook.js and its checks.
const at = process.argv.indexOf('__complete');
const words = at === -1 ? process.argv.slice(2) : process.argv.slice(at + 1);
process.argv = [process.argv[0], process.argv[1], '__complete', '--cobra', '--', ...words];
await import('./kube-runbook.js');
