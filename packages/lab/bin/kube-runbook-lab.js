#!/usr/bin/env node
// Entry point of the lab (`kube-runbook-lab up`, `down`, `status`, `install`, `demo` ...). It starts as kube-runbook
// does: the same Node.js version check first, and a checkout that was never built says so.
import { start } from 'kube-runbook/bin/start.js';

await start('kube-runbook-lab', import.meta.url, { upgrade: '', build: "in the repository's root" });
