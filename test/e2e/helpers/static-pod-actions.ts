import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { CoreV1Api } from '@kubernetes/client-node';
import { stringify } from 'yaml';
import { expect } from 'vitest';
import { instanceRunDir } from '../../../packages/lab/src/host/paths.js';
import { cli, until, type LabInfo } from './lab.js';

/**
 * The kubeadm layout's control-plane actions on a lab whose cp-1 runs the control plane as static pods (`lab up
 * --static-pods`, or `--kubeadm`), each through the CLI as a small runbook, and checked in cp-1's own containerd.
 */

/** sh: defines `kr_running NAME`: exit 0 when the container named NAME runs in cp-1's containerd (its pid in $kr_pid). */
export function containerRunning(lab: LabInfo): string {
  const ctr = /'?([^'\s]*\/ctr)'? /.exec(readFileSync(join(lab.stateDir, 'nodes', 'cp-1', 'containerd', 'health'), 'utf8'))![1]!;
  const c = `'${ctr}' -a '${join(instanceRunDir(lab.instance), 'cp-1', 'containerd.sock')}' -n k8s.io`;
  return (
    `kr_running() { for id in $(${c} containers ls -q "labels.\\"io.kubernetes.container.name\\"==$1" 2>/dev/null); do ` +
    `kr_pid=$(${c} tasks ls 2>/dev/null | awk -v id="$id" '$1 == id && $3 == "RUNNING" {print $2}'); [ -n "$kr_pid" ] && return 0; done; return 1; }\n`
  );
}

/**
 * Runs `action` on the control plane through the CLI, from a runbook written to `work`: `before` (sh, with
 * `kr_running`) holds first, the action, then `after` holds; all is reverted at the end, exit 0.
 */
export async function runControlPlaneAction(
  lab: LabInfo,
  work: string,
  action: string,
  checks: { before: string; after: string },
  params: Record<string, unknown> = {},
): Promise<void> {
  const running = containerRunning(lab);
  const check = (name: string, run: string) => ({
    name,
    expect: { probe: 'command', with: { node: 'cp-1', interval: '500ms', run: `${running}${run}` } },
    within: '60s',
  });
  const file = join(work, `${action}.yaml`);
  writeFileSync(
    file,
    stringify({
      apiVersion: 'kube-runbook/v1',
      kind: 'Runbook',
      metadata: { name: `control-plane-${action}`, description: `${action} on cp-1's static pods` },
      spec: {
        safety: { allowContexts: ['lab-*'], maxDuration: '5m', faultTtl: '3m', maxUnavailable: { controlPlane: '100%' } },
        steps: [
          check('before', checks.before),
          { name: action, action, with: { nodes: 'control-plane', ...params } },
          check('after', checks.after),
        ],
      },
    }),
  );
  const r = await cli(['run', file, '-i', lab.inventoryFile, '--yes', '-o', 'text'], { timeoutMs: 300_000 });
  expect(r.code, `${r.stdout}\n${r.stderr}`).toBe(0);
  expect(r.stdout).toContain(`reverted ${action} on cp-1`);
}

/**
 * The cluster answers and the kubelet reports `component`'s container running again (the revert already waited for
 * its health endpoint; Ready would add kubeadm's startup probe delay of 10 s).
 */
export async function containerBack(core: CoreV1Api, component: string): Promise<void> {
  await until(
    `${component}'s container running again`,
    async () => {
      const pod = await core.readNamespacedPod({ name: `${component}-cp-1`, namespace: 'kube-system' });
      return Boolean(pod.status?.containerStatuses?.[0]?.state?.running);
    },
    60_000,
    500,
  );
}
