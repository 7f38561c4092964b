/**
 * The runbook test/fixtures/engine-child.mjs runs in a process of its own: one run-command fault on the local machine
 * (`apply`, undone by `revert`), then a long wait, so the test can signal or kill the process mid-run.
 */
export function childRunbook(name: string, apply: string, revert: string): string {
  return JSON.stringify({
    apiVersion: 'kube-runbook/v1',
    kind: 'Runbook',
    metadata: { name },
    spec: {
      safety: { allowContexts: ['lab'], faultTtl: '10m' },
      steps: [{ action: 'run-command', with: { nodes: 'all', apply, revert } }, { wait: '10m' }],
    },
  });
}
