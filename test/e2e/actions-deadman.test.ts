import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { realClock } from '../../src/core/clock.js';
import { series } from '../../src/kube/prometheus.js';
import { BIN, cliLab, killAfterEach } from './helpers/cli-lab.js';
import { labContext, type LabContext } from './helpers/lab-context.js';

/**
 * The executor killed with SIGKILL right after applying faults: the node-side dead-man reverts them within
 * faultTtl + 5 s; and, with a long faultTtl, `kube-runbook recover` reverts them at once. load-apiserver `from: nodes`
 * likewise: the nodes' loads stop within faultTtl + 5 s.
 */
const INSTANCE = 'act2';
const fx = cliLab(INSTANCE);
let child: ChildProcess | undefined;

killAfterEach(() => child);

const sleep = (ms: number) => realClock.sleep(ms);

function runbook(name: string, faultTtl: string): string {
  const file = join(fx.work, `${name}.yaml`);
  writeFileSync(
    file,
    `apiVersion: kube-runbook/v1
kind: Runbook
metadata: {name: ${name}}
spec:
  safety: {allowContexts: [${JSON.stringify(fx.lab.context)}], faultTtl: ${faultTtl}, maxDuration: 10m, maxUnavailable: {worker: 2}}
  steps:
    - {name: cut node-1 off, action: block-kubelet-egress, with: {nodes: {names: [node-1]}}}
    - {name: stop node-2's kubelet, action: stop-kubelet, with: {nodes: {names: [node-2]}}}
    - {name: hold, wait: 5m}
`,
  );
  return file;
}

const BOTH_APPLIED = [/applied block-kubelet-egress on node-1/, /applied stop-kubelet on node-2/];

/** Starts `kube-runbook run`; resolves with the run id once every fault `applied` names is applied. */
function startRun(file: string, applied: RegExp[] = BOTH_APPLIED): Promise<string> {
  return new Promise((resolvePromise, reject) => {
    const c = spawn(process.execPath, [BIN, 'run', file, '-i', fx.lab.inventoryFile, '--yes', '-o', 'text'], {
      env: fx.env(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child = c;
    let out = '';
    let runId = '';
    const onData = (d: Buffer) => {
      out += d.toString();
      runId ||= /run (\S+): /.exec(out)?.[1] ?? '';
      if (applied.every((a) => a.test(out))) resolvePromise(runId);
    };
    c.stdout!.on('data', onData);
    c.stderr!.on('data', onData);
    c.on('exit', (code) => reject(new Error(`the run ended (exit ${code}) before its faults were applied:\n${out}`)));
  });
}

const sh = (node: string, script: string) => fx.nodes.exec(node, script, { timeoutMs: 20_000 });
const chainGone = async () => !(await sh('node-1', 'iptables -w -S')).stdout.includes('KR-EGRESS');
const kubeletBack = async () => (await sh('node-2', `${fx.lab.stateDir}/nodes/node-2/kubelet/health`)).code === 0;
const kubeletStopped = async () => (await sh('node-2', `${fx.lab.stateDir}/nodes/node-2/kubelet/status`)).code === 3;

async function bothReverted(timeoutMs: number): Promise<number> {
  const t0 = realClock.now();
  while (realClock.now() - t0 < timeoutMs) {
    if ((await chainGone()) && (await kubeletBack())) return realClock.now() - t0;
    await sleep(200);
  }
  throw new Error(`faults still applied ${timeoutMs} ms after the executor was killed`);
}

describe('executor killed with SIGKILL right after apply', () => {
  it('the node-side dead-man reverts every fault within faultTtl + 5 s', async () => {
    const ttlMs = 10_000;
    const runId = await startRun(runbook('act-deadman', '10s'));
    expect(await chainGone()).toBe(false);
    expect(await kubeletStopped()).toBe(true);
    child!.kill('SIGKILL');
    const took = await bothReverted(ttlMs + 5000);
    console.log(`dead-man: both faults reverted ${(took / 1000).toFixed(1)} s after SIGKILL (faultTtl 10 s)`);
    expect(took).toBeLessThanOrEqual(ttlMs + 5000);
    // the journal still lists both faults: recover finds them reverted, says the dead-man did it, and clears its records
    // (--force: the killed executor renewed the run lock seconds ago, so recover cannot tell it dead by the lock yet)
    const r = spawnSync(process.execPath, [BIN, 'recover', runId, '--force'], { env: fx.env(), encoding: 'utf8', timeout: 120_000 });
    expect(r.status, `${r.stdout}\n${r.stderr}`).toBe(0);
    expect(r.stderr).toContain('had already reverted');
    const left = await sh('node-1', `ls -d /var/lib/kube-runbook/deadman/${runId}/* 2>/dev/null || true`);
    expect(left.stdout.trim(), 'dead-man records left').toBe('');
  });

  it('`kube-runbook recover` reverts them at once and disarms the dead-men', async () => {
    const runId = await startRun(runbook('act-recover', '10m'));
    child!.kill('SIGKILL');
    await sleep(500);
    expect(await chainGone()).toBe(false);
    const t0 = realClock.now();
    // at once: the operator who killed it says so (--force), since its lock was renewed a moment ago
    const r = spawnSync(process.execPath, [BIN, 'recover', runId, '--force'], { env: fx.env(), encoding: 'utf8', timeout: 120_000 });
    const took = realClock.now() - t0;
    expect(r.status, `${r.stdout}\n${r.stderr}`).toBe(0);
    expect(await chainGone()).toBe(true);
    expect(await kubeletBack()).toBe(true);
    console.log(`recover: both faults reverted in ${(took / 1000).toFixed(1)} s (faultTtl 10 m)`);
    const armed = await sh('node-1', `ls -d /var/lib/kube-runbook/deadman/${runId}/* 2>/dev/null | grep -v '[.]fired$' || true`);
    expect(armed.stdout.trim(), 'no dead-man left armed').toBe('');
  });
});

describe('load-apiserver from: nodes, executor killed with SIGKILL', () => {
  const SA = { namespace: 'default', name: 'kr-nodeload-e2e' };
  let lc: LabContext;
  const kube = () => lc.ctx.kube;
  const post = (path: string, body: unknown) =>
    kube().json!(path, { method: 'POST', body, timeoutMs: 10_000 }).catch((e: unknown) => {
      if ((e as { status?: number }).status !== 409) throw e;
    });
  const rbac = '/apis/rbac.authorization.k8s.io/v1';
  const dispatched = async () =>
    series((await kube().raw('/metrics', { timeoutMs: 5000 })).body, 'apiserver_flowcontrol_dispatched_requests_total')
      .filter((x) => x.labels.flow_schema === SA.name)
      .reduce((n, x) => n + x.value, 0);
  /** The processes of this run's loads (the nodes are namespaces of one machine: one process table). */
  const loads = async (runId: string) =>
    (await sh('node-1', `pgrep -f /var/lib/kube-runbook/load/${runId}/ || true`)).stdout.trim().split('\n').filter(Boolean);
  /** The answers curl got on a node so far. */
  const answered = async (node: string, runId: string) =>
    Number(
      (await sh(node, `cat /var/lib/kube-runbook/load/${runId}/*-${node}/codes.* 2>/dev/null | grep -c '^200$' || true`)).stdout.trim(),
    );

  beforeAll(async () => {
    lc = await labContext(fx.lab);
    // the culprit's identity: a ServiceAccount that may list pods, and a FlowSchema of its own to count its requests by
    await post(`/api/v1/namespaces/${SA.namespace}/serviceaccounts`, { metadata: { name: SA.name } });
    await post(`${rbac}/clusterroles`, { metadata: { name: SA.name }, rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['list'] }] });
    await post(`${rbac}/clusterrolebindings`, {
      metadata: { name: SA.name },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: SA.name },
      subjects: [{ kind: 'ServiceAccount', ...SA }],
    });
    await post('/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas', {
      metadata: { name: SA.name },
      spec: {
        priorityLevelConfiguration: { name: 'workload-low' },
        matchingPrecedence: 500,
        distinguisherMethod: { type: 'ByUser' },
        rules: [
          {
            subjects: [{ kind: 'ServiceAccount', serviceAccount: SA }],
            resourceRules: [{ verbs: ['*'], apiGroups: ['*'], resources: ['*'], namespaces: ['*'], clusterScope: true }],
          },
        ],
      },
    });
  });
  afterAll(async () => lc?.close());

  it("each node sends its share as the ServiceAccount; the node-side dead-man stops every node's load within faultTtl + 5 s", async () => {
    const ttlMs = 10_000;
    const file = join(fx.work, 'nodeload.yaml');
    writeFileSync(
      file,
      `apiVersion: kube-runbook/v1
kind: Runbook
metadata: {name: nodeload}
spec:
  safety: {allowContexts: [${JSON.stringify(fx.lab.context)}], faultTtl: 10s, maxDuration: 10m, maxUnavailable: {worker: 2}}
  steps:
    - name: load from the nodes
      action: load-apiserver
      with:
        from: nodes
        nodes: {names: [node-1, node-2]}
        qps: 20
        concurrency: 4
        userAgent: kubelet-liveness-like
        as: ${SA.namespace}/${SA.name}
        requests: [{verb: list, resource: pods}]
    - {name: hold, wait: 5m}
`,
    );
    const before = await dispatched();
    const runId = await startRun(file, [/applied load-apiserver on node-1/, /applied load-apiserver on node-2/]);
    await sleep(2000);
    expect((await loads(runId)).length, 'curl loops running on the nodes').toBeGreaterThanOrEqual(4);
    expect(await answered('node-1', runId), 'answers node-1 got').toBeGreaterThan(0);
    expect(await answered('node-2', runId), 'answers node-2 got').toBeGreaterThan(0);
    expect(await dispatched(), 'requests its FlowSchema dispatched').toBeGreaterThan(before);
    child!.kill('SIGKILL');
    const t0 = realClock.now();
    // the load ends by itself faultTtl after it started, and the dead-man, faultTtl after the last keepalive, removes its files
    const loadDirs = async () => (await sh('node-1', `ls /var/lib/kube-runbook/load/${runId} 2>/dev/null || true`)).stdout.trim();
    while (((await loads(runId)).length || (await loadDirs())) && realClock.now() - t0 < ttlMs + 5000) await sleep(200);
    const took = realClock.now() - t0;
    console.log(
      `load-apiserver from nodes: ${(await dispatched()) - before} requests dispatched; stopped and cleaned ${(took / 1000).toFixed(1)} s after SIGKILL (faultTtl 10 s)`,
    );
    // qps 20 for at most faultTtl (10 s) (the 4 curl processes may each start one more as it ends), and each kind of
    // request once on each node before its load starts
    expect((await dispatched()) - before, 'requests within the bound').toBeLessThanOrEqual(20 * 10 + 4 + 2);
    expect(await loads(runId), 'load processes left').toEqual([]);
    expect(took).toBeLessThanOrEqual(ttlMs + 5000);
    expect(await loadDirs(), 'load files (the token among them) left').toBe('');
    const fired = await sh('node-1', `cat /var/lib/kube-runbook/deadman/${runId}/*load-apiserver-node-*.fired/exit 2>/dev/null || true`);
    expect(fired.stdout.trim().split('\n'), "both nodes' dead-men fired, and their reverts succeeded").toEqual(['0', '0']);
  });
});
