import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/** Runs the BUILT cli (`npm run build` first) from the repository root, as a user would, with no cluster. */
const root = fileURLToPath(new URL('..', import.meta.url));

function plan(...args: string[]): Promise<{ code: number; stdout: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['bin/kube-runbook.js', 'plan', ...args],
      { cwd: root, env: { ...process.env, KUBE_RUNBOOK_INVENTORY: '', KUBECONFIG: '/nonexistent/kubeconfig' } },
      (err, stdout) => resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout }),
    );
  });
}

describe('kube-runbook plan durations', () => {
  it('writes durations in parameters as a person does, never as milliseconds', async () => {
    const r = await plan('runbooks/apiserver-outage.yaml', '-i', 'examples/inventory-kubeadm.yaml', '--kubeconfig', '/nonexistent/kubeconfig');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('eviction-forecast {margin: 20s, nodes: all,');
    expect(r.stdout).toContain('flapping: {"transitions":3,"window":"5m"}} to read ok within 1m');
    expect(r.stdout).toContain('stop-apiserver on cp-1, cp-2, cp-3 {timeout: 2m}');
    expect(r.stdout).not.toMatch(/\b\d{4,}\b/);
  });

  it('gives named waits their duration, and unnamed ones once', async () => {
    const named = await plan('runbooks/apiserver-outage.yaml', '-i', 'examples/inventory-kubeadm.yaml', '--kubeconfig', '/nonexistent/kubeconfig');
    expect(named.stdout).toMatch(/^ {2}4\. the outage lasts — wait 15s$/m);
    expect(named.stdout).toMatch(/^ {2}7\. the kubelets stay cut off past the toleration — wait 1m30s$/m);
    const unnamed = await plan('examples/guards-and-remediation.yaml', '-i', 'examples/inventory-local.yaml', '--kubeconfig', '/nonexistent/kubeconfig');
    expect(unnamed.stdout).toMatch(/^ {2}4\. wait 30s$/m);
    expect(unnamed.stdout).toContain('command {run: ! test -e /tmp/kube-runbook-example-trouble, interval: 1s');
  });
});
