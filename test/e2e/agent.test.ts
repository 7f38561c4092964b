/**
 * Nodes reached without ssh: the lab's workers through node agents (`spec.transport: {type: agent}`), the control
 * plane over netns. The kubelet simulator runs each agent pod's command for real in its node's network namespace with
 * the pod's ServiceAccount token, so scripts, results and the run Lease go through the real apiserver.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CoreV1Api,
  KubeConfig,
  KubernetesObjectApi,
  type KubernetesObject,
  PatchStrategy,
  RbacAuthorizationV1Api,
  Watch,
} from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { realClock } from '../../src/core/clock.js';
import { runLeaseName } from '../../src/nodes/agent-protocol.js';
import { deadmanFired, untilJournalApplied, type DeadmanRecord } from './helpers/kills.js';
import { AGENT_NS, agentInventory, agentPodsGone as agentPodsGoneIn, applyAgentManifests } from './helpers/agents.js';
import { REPO, cli, coreApi, leftovers, startLab, stopLab, until, type LabInfo, labCli } from './helpers/lab.js';
import { writeRunbook } from './helpers/runbook-file.js';

const INSTANCE = 'ag1';
const NS = AGENT_NS;
let lab: LabInfo;
let work: string;
let inventory: string;
let objects: KubernetesObjectApi;

const apply = (o: KubernetesObject) => objects.patch(o, undefined, undefined, 'kube-runbook-e2e', true, PatchStrategy.ServerSideApply);

function runbook(name: string, faultTtl: string, steps: unknown[]): string {
  return writeRunbook(work, name, { safety: { allowContexts: ['lab-*'], maxDuration: '5m', faultTtl }, steps });
}

const netnsOf = (node: string) => lab.nodes.find((n) => n.name === node)!.netns;

/** A command's stdout; it is killed after 30 s (iptables waiting for the xtables lock, say) and the test fails saying so. */
async function sh(cmd: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const c = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'ignore'], timeout: 30_000 });
    let out = '';
    c.stdout.on('data', (b: Buffer) => (out += b.toString()));
    c.on('close', (code, signal) =>
      signal ? reject(new Error(`${cmd} ${args.join(' ')}: killed by ${signal} (no answer in 30 s)`)) : resolve(out),
    );
  });
}

const egressRules = async (node: string) =>
  (await sh('ip', ['netns', 'exec', netnsOf(node), 'iptables', '-w', '10', '-S'])).split('\n').filter((l) => l.includes('KR-EGRESS'));
const kubeletPid = (node: string) => readFileSync(join(lab.stateDir, 'nodes', node, 'kubelet', 'pid'), 'utf8').trim();
const kubeletUp = async (node: string) => {
  try {
    process.kill(Number(kubeletPid(node)), 0);
    return true;
  } catch {
    return false;
  }
};

/** The run's agent pods are deleted; gone once their kubelets have killed their processes (seconds). */
const agentPodsGone = (why = '') => agentPodsGoneIn(lab, why, 30_000);

interface Report {
  status: string;
  preflight: { check: string; ok: boolean; detail: string }[];
  faults: { action: string; node?: string; status: string; appliedAt?: string; revertedAt?: string }[];
  remaining: unknown[];
}

async function runJson(file: string, inv: string, args: string[] = []): Promise<{ code: number | null; report: Report; stderr: string }> {
  const r = await cli(['run', file, '-i', inv, '--yes', '--output', 'json', ...args], { timeoutMs: 600_000 });
  return { code: r.code, report: JSON.parse(r.stdout) as Report, stderr: r.stderr };
}

const settled = () => until('the lab to settle', async () => (await labCli(['status', '--instance', INSTANCE])).code === 0, 180_000, 1000);

beforeAll(async () => {
  lab = await startLab({ instance: INSTANCE, nodes: 3 });
  work = mkdtempSync(join(tmpdir(), 'kr-agent-'));
  const kc = new KubeConfig();
  kc.loadFromFile(lab.kubeconfig);
  objects = KubernetesObjectApi.makeApiClient(kc);
  inventory = agentInventory(lab);
  await applyAgentManifests(lab, inventory);
}, 1_200_000);

afterAll(async () => {
  await stopLab(INSTANCE);
  if (work) rmSync(work, { recursive: true, force: true });
  expect(await leftovers(INSTANCE)).toEqual([]);
});

describe('faults through agents', () => {
  it('stop-kubelet is reverted through the agent while the kubelet is down', async () => {
    const rb = runbook('agent-stop-kubelet', '30s', [
      { name: 'stop the kubelet', action: 'stop-kubelet', with: { nodes: { names: ['node-1'] } } },
      { name: 'down a while', wait: '10s' },
    ]);
    // Watched for as long as the run lasts: its agent pods may take a while to start on a loaded machine.
    const down: boolean[] = [];
    let running = true;
    const watching = (async () => {
      while (running) {
        down.push(!(await kubeletUp('node-1')));
        await realClock.sleep(250);
      }
    })();
    const { code, report, stderr } = await runJson(rb, inventory).finally(() => (running = false));
    await watching;
    expect(code, stderr.slice(-2000)).toBe(0);
    expect(report.faults).toEqual([expect.objectContaining({ action: 'stop-kubelet', node: 'node-1', status: 'reverted' })]);
    expect(down.some(Boolean), 'the kubelet was down during the run').toBe(true);
    expect(await kubeletUp('node-1')).toBe(true);
    // reverted by the executor through the agent, not by the node's dead-man (30 s away)
    expect(stderr).not.toMatch(/dead-man on node-1 had already reverted/);
    expect(Date.parse(report.faults[0]!.revertedAt!) - Date.parse(report.faults[0]!.appliedAt!)).toBeLessThan(25_000);
    await agentPodsGone();
  });

  it('block-kubelet-egress scope node cuts the agent off too: plan says so, and the dead-man reverts it within faultTtl + 5 s', async () => {
    const rb = runbook('agent-egress-node', '20s', [
      { name: 'cut node-2 off', action: 'block-kubelet-egress', with: { nodes: { names: ['node-2'] }, scope: 'node' } },
      { name: 'hold', wait: '40s' },
    ]);
    const plan = await cli(['plan', rb, '-i', inventory]);
    expect(plan.stdout).toContain(
      "undone only by the node's dead-man, 20s after the last run Lease renewal the node saw: it cuts the node's agent off from the apiserver too",
    );
    let firstSeen: number | undefined;
    let lastSeen: number | undefined;
    let stop = false;
    const watching = (async () => {
      while (!stop) {
        if ((await egressRules('node-2')).length) {
          firstSeen ??= realClock.now();
          lastSeen = realClock.now();
        }
        await realClock.sleep(200);
      }
    })();
    const { code, report, stderr } = await runJson(rb, inventory);
    stop = true;
    await watching;
    expect(code, stderr.slice(-2000)).toBe(0);
    expect(report.faults).toEqual([expect.objectContaining({ action: 'block-kubelet-egress', node: 'node-2', status: 'reverted' })]);
    expect(firstSeen, 'the rules were in place').toBeDefined();
    const heldMs = lastSeen! - firstSeen!;
    expect(heldMs).toBeLessThan(25_000);
    expect(heldMs).toBeGreaterThan(10_000);
    expect(await egressRules('node-2')).toEqual([]);
    await agentPodsGone();
    await settled();
  });
});

describe('someone else who may write ConfigMaps in the agent namespace', () => {
  it('drives no agent, and forges no answer: the revert fails as it really did, exit 4, and no agent pod is left', async () => {
    // another ServiceAccount of the agent namespace, with every right on its ConfigMaps
    const intruderKc = await identity('intruder', [
      { apiGroups: [''], resources: ['configmaps'], verbs: ['create', 'get', 'list', 'update', 'delete'] },
    ]);
    const intruder = intruderKc.makeApiClient(CoreV1Api);

    const tag = `${process.pid}-${realClock.now()}`;
    const intruded = `/tmp/kr-e2e-intruded-${tag}`;
    const applied = `/tmp/kr-e2e-applied-${tag}`;
    const fixed = `/tmp/kr-e2e-fixed-${tag}`;
    // the revert takes 6 s and fails: long enough for a forged "exit 0" to be written over its claim; it passes once
    // the test says so (for recover)
    const rb = runbook('agent-intruder', '30s', [
      {
        name: 'mark node-1',
        action: 'run-command',
        with: {
          nodes: { names: ['node-1'] },
          apply: `touch ${applied}`,
          revert: `if [ -e ${fixed} ]; then rm -f ${applied}; exit 0; fi; sleep 6; echo "revert refused" >&2; exit 1`,
        },
      },
      { name: 'hold', wait: '8s' },
    ]);
    let stop = false;
    const forged: string[] = [];
    let written: { labels: Record<string, string>; annotations: Record<string, string> } | undefined;
    const intruding = (async () => {
      while (!stop) {
        const cms = (await intruder.listNamespacedConfigMap({ namespace: NS }).catch(() => ({ items: [] }))).items;
        const request = cms.find(
          (c) => c.metadata?.labels?.['kube-runbook/kind'] === 'request' && c.metadata.annotations?.['kube-runbook/node-name'] === 'node-1',
        );
        // a request of its own for node-1, as the executor labels them, signed with nothing the agent knows
        if (request && !written) {
          written = { labels: request.metadata!.labels!, annotations: request.metadata!.annotations! };
          await intruder.createNamespacedConfigMap({
            namespace: NS,
            body: {
              metadata: { name: `kr-exec-intruder-${tag}`, labels: written.labels, annotations: written.annotations },
              data: {
                script: `touch ${intruded}`,
                timeoutMs: '10000',
                deadline: new Date(realClock.now() + 60_000).toISOString(),
                signature: 'AAAA',
              },
            },
          });
        }
        // every running script of node-1 "finished fine", as far as whoever reads the results can tell
        for (const c of cms)
          if (
            c.metadata?.name?.endsWith('-result') &&
            c.data?.state === 'running' &&
            c.metadata.labels?.['kube-runbook/node'] === written?.labels['kube-runbook/node']
          ) {
            const body = { ...c, data: { ...c.data, state: 'done', code: '0', stdout: 'forged', stderr: '' } };
            await intruder.replaceNamespacedConfigMap({ name: c.metadata.name, namespace: NS, body }).then(
              () => forged.push(c.metadata!.name!),
              () => undefined,
            );
          }
        await realClock.sleep(150);
      }
    })();
    const state = mkdtempSync(join(work, 'state-'));
    const { code, report, stderr } = await runJson(rb, inventory, ['--state-dir', state]);
    stop = true;
    await intruding;
    expect(written, 'the intruder saw a request to copy').toBeDefined();
    expect(forged.length, 'results forged').toBeGreaterThan(0);
    expect(code, stderr.slice(-2000)).toBe(4);
    expect(report.faults).toEqual([
      expect.objectContaining({ action: 'run-command', node: 'node-1', status: expect.not.stringMatching(/^reverted$/) }),
    ]);
    expect(report.remaining).toHaveLength(1);
    expect(stderr).toMatch(/run-command revert failed on node-1 \(exit 1\): revert refused/);
    expect(stderr).toMatch(/the result kr-agent\/kr-exec-\S+-result is not signed by the node's agent; not believed/);
    expect(existsSync(intruded), "the intruder's script ran").toBe(false);
    const left = (await coreApi(lab).listNamespacedConfigMap({ namespace: NS })).items.map((c) => c.metadata!.name!);
    expect(
      left.filter((n) => n.startsWith(`kr-exec-intruder-${tag}-result`)),
      "an agent took the intruder's request",
    ).toEqual([]);
    // exit 4: the agents are gone all the same (the fault's dead-man holds the revert; recover starts agents of its own)
    await agentPodsGone(' after exit 4');
    // recover, through agents of its own, reverts it and releases the run lock
    writeFileSync(fixed, '');
    // --force: the operator killed it; the run lock its executor renewed until then stays live for a while yet
    const r = await cli(['recover', '--state-dir', state, '--all', '--force'], { timeoutMs: 300_000 });
    expect(r.code, `${r.stdout}\n${r.stderr}`).toBe(0);
    expect(existsSync(applied)).toBe(false);
    await agentPodsGone(' after recover');
    await coreApi(lab)
      .deleteNamespacedConfigMap({ name: `kr-exec-intruder-${tag}`, namespace: NS })
      .catch(() => undefined);
    rmSync(fixed, { force: true });
  });
});

/** A ServiceAccount of the agent namespace with a Role of `rules` only, and a kubeconfig of its token. */
async function identity(name: string, rules: unknown[]): Promise<KubeConfig> {
  await apply({ apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name, namespace: NS } } as KubernetesObject);
  await apply({ apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'Role', metadata: { name, namespace: NS }, rules } as KubernetesObject);
  await apply({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name, namespace: NS },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name },
    subjects: [{ kind: 'ServiceAccount', name, namespace: NS }],
  } as KubernetesObject);
  const token = (
    await coreApi(lab).createNamespacedServiceAccountToken({
      name,
      namespace: NS,
      body: { spec: { audiences: [], expirationSeconds: 3600 } },
    })
  ).status!.token;
  const kc = new KubeConfig();
  kc.loadFromFile(lab.kubeconfig);
  const cluster = kc.getCurrentCluster()!;
  const out = new KubeConfig();
  out.loadFromOptions({
    clusters: [cluster],
    users: [{ name, token }],
    contexts: [{ name, cluster: cluster.name, user: name }],
    currentContext: name,
  });
  return out;
}

/** One JSON call with a kubeconfig's token (its own MicroTime text, which the typed clients would not keep). */
async function callAs<T>(kc: KubeConfig, method: string, path: string, body?: unknown): Promise<T> {
  const cluster = kc.getCurrentCluster()!;
  const url = new URL(path, cluster.server);
  const ca = cluster.caData ? Buffer.from(cluster.caData, 'base64') : readFileSync(cluster.caFile!);
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      url,
      { method, ca, headers: { authorization: `Bearer ${kc.getCurrentUser()!.token}`, 'content-type': 'application/json' }, timeout: 5000 },
      (res) => {
        let text = '';
        res.on('data', (b: Buffer) => (text += b.toString()));
        res.on('end', () =>
          (res.statusCode ?? 0) < 300 ? resolve(JSON.parse(text) as T) : reject(new Error(`${res.statusCode}: ${text}`)),
        );
      },
    );
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

describe('the executor SIGKILLed during a run over agents', () => {
  const rb = () =>
    runbook('agent-kill', '20s', [
      { name: 'stop a kubelet', action: 'stop-kubelet', with: { nodes: { names: ['node-1'] } } },
      { name: 'cut another off', action: 'block-kubelet-egress', with: { nodes: { names: ['node-3'] } } },
      { name: 'hold', wait: '60s' },
    ]);

  // killed once the journal records both faults applied and the node shows them in place; a kill during the hold is
  // test/e2e/real-nodes.test.ts's, on a real agent container. Meanwhile someone who may only get and update Leases in
  // the agent namespace renews the run Lease every second: the node agents count no renewal the executor did not sign,
  // so the dead-men fire within faultTtl + DEADMAN_MARGIN_MS (the margin docs/security.md states) of the last keepalive
  // all the same, as the nodes' own dead-man records show.
  it('killed once its faults are applied, its run Lease renewed by another: both dead-men fire within faultTtl + 10 s of the last keepalive, every agent pod gone after recover', async () => {
    const renewer = await identity('lease-renewer', [
      { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['get', 'patch', 'update'] },
    ]);
    const state = mkdtempSync(join(work, 'state-'));
    const child: ChildProcess = spawn(
      process.execPath,
      [join(REPO, 'bin', 'kube-runbook.js'), 'run', rb(), '-i', inventory, '--yes', '--state-dir', state],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let out = '';
    child.stdout!.on('data', (b: Buffer) => (out += b.toString()));
    child.stderr!.on('data', (b: Buffer) => (out += b.toString()));
    const exited = new Promise((r) => child.once('exit', r));
    const run = await untilJournalApplied({ out: () => out, ended: () => child.exitCode !== null || child.signalCode !== null }, [
      { action: 'stop-kubelet', node: 'node-1' },
      { action: 'block-kubelet-egress', node: 'node-3' },
    ]).catch((e: unknown) => {
      child.kill('SIGKILL');
      throw e;
    });
    // in place, as the nodes show it
    expect(await kubeletUp('node-1'), "node-1's kubelet, once its stop is applied").toBe(false);
    expect((await egressRules('node-3')).length, "node-3's egress rules, once applied").toBeGreaterThan(0);
    // the run id, as whoever reads the agent pods' arguments finds it
    const pod = (await coreApi(lab).listNamespacedPod({ namespace: NS })).items[0]!;
    const args = pod.spec!.containers[0]!.args!;
    const runId = args[args.indexOf('--run-id') + 1]!;
    expect(runId).toBe(run.runId);
    child.kill('SIGKILL');
    await exited;
    const killedAt = realClock.now();
    const since = () => ((realClock.now() - killedAt) / 1000).toFixed(1);
    // each step says when it ends: a step that hangs shows in the log
    const step = (what: string) => console.log(`agent run killed once its faults were applied: ${what} at +${since()} s`);
    let renewing = true;
    let renewals = 0;
    const leasePath = `/apis/coordination.k8s.io/v1/namespaces/${NS}/leases/${runLeaseName(runId)}`;
    const renew = (async () => {
      while (renewing) {
        try {
          const lease = await callAs<{ spec: { renewTime: string } }>(renewer, 'GET', leasePath);
          lease.spec.renewTime = new Date().toISOString().replace(/(\.\d{3})Z$/, '$1000Z');
          await callAs(renewer, 'PUT', leasePath, lease);
          renewals++;
        } catch (e) {
          console.log(`the renewer: ${(e as Error).message.slice(0, 200)}`);
        }
        await realClock.sleep(1000);
      }
    })();
    const onNode = (node: string) => (script: string) => sh('ip', ['netns', 'exec', netnsOf(node), 'sh', '-c', script]);
    let fired: DeadmanRecord[];
    try {
      fired = await Promise.all(
        run.applied.map((f) => deadmanFired(onNode(f.node!), runId, f.faultId, { ttlMs: 20_000, killedAt, timeoutMs: 90_000 })),
      );
    } finally {
      renewing = false;
      await renew;
    }
    console.log(
      `agent run killed once its faults were applied, the run Lease renewed ${renewals} times by another: dead-men fired ` +
        `${run.applied.map((f, i) => `${f.action}@${f.node} ${fired[i]!.firedAt! - fired[i]!.keepalive} s`).join(', ')} after the last keepalive (faultTtl 20 s)`,
    );
    expect(renewals, 'the renewer renewed the run Lease').toBeGreaterThan(10);
    // and the faults are gone from the nodes
    expect(await egressRules('node-3'), "node-3's rules after its dead-man's revert").toEqual([]);
    await until("node-1's kubelet runs again", () => kubeletUp('node-1'), 10_000, 250);
    // the agents saw the renewals, and said why they did not count them
    let logs: string[] = [];
    try {
      logs = execFileSync('grep', ['-rlZ', '--include=log', 'ignored run Lease renewal: its signature', lab.stateDir], { encoding: 'utf8' })
        .split('\0')
        .filter(Boolean);
    } catch {
      // grep found none
    }
    expect(logs.length, 'agents that ignored the renewals').toBeGreaterThan(0);
    step('dead-men have reverted both faults');
    // --force: the operator killed it; the run lock its executor renewed until then stays live for a while yet
    const r = await cli(['recover', '--state-dir', state, '--all', '--force'], { timeoutMs: 300_000 });
    expect(r.code, `${r.stdout}\n${r.stderr}`).toBe(0);
    step('recover done');
    await agentPodsGone(` after recover: ${r.stdout}\n${r.stderr}`);
    step('agent pods gone');
    expect(realClock.now() - killedAt).toBeLessThan(300_000);
    await settled();
    step('lab settled');
  });
});

describe('preflight refuses bad agent settings with the cause and the fix, applying nothing', () => {
  const rb = () =>
    runbook('agent-refused', '30s', [{ name: 'stop a kubelet', action: 'stop-kubelet', with: { nodes: { names: ['node-1'] } } }]);

  it('an image that cannot start', async () => {
    const inv = agentInventory(lab, 'inventory-bad-image', { image: 'ghcr.io/kube-runbook/kube-runbook-agent:no-such-tag' });
    const { code, report } = await runJson(rb(), inv);
    expect(code).toBe(3);
    expect(report.status).toBe('refused');
    expect(report.preflight.find((p) => p.check === 'agents')?.detail).toBe(
      'cannot start the node agents: node-1: image ghcr.io/kube-runbook/kube-runbook-agent:no-such-tag cannot be pulled (ErrImagePull: manifest unknown: ' +
        "the lab's registry has ghcr.io/kube-runbook/kube-runbook-agent:" +
        `${JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')).version as string} only (not ghcr.io/kube-runbook/kube-runbook-agent:no-such-tag)); ` +
        "fix spec.transport.image, or give the registry's credentials as spec.transport.imagePullSecret (a Secret in kr-agent)",
    );
    expect(report.faults).toEqual([]);
    await agentPodsGone();
  });

  it('a ServiceAccount that is not there, then a namespace whose Pod Security level refuses privileged pods', async () => {
    await apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'kr-agent-psa' } } as KubernetesObject);
    const inv = agentInventory(lab, 'inventory-psa', { namespace: 'kr-agent-psa' });
    const noSa = await runJson(rb(), inv);
    expect(noSa.code).toBe(3);
    expect(noSa.report.preflight.find((p) => p.check === 'agents')?.detail).toMatch(
      /^cannot start the node agents: node-1: the ServiceAccount kr-agent-psa\/kube-runbook-agent does not exist \(.*\); create it with kube-runbook agent manifests -i INVENTORY \| kubectl apply -f -$/,
    );
    expect(noSa.report.faults).toEqual([]);
    const m = await cli(['agent', 'manifests', '-i', inv]);
    for (const d of parseAllDocuments(m.stdout)) await apply(d.toJS() as KubernetesObject);
    await apply({
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name: 'kr-agent-psa', labels: { 'pod-security.kubernetes.io/enforce': 'baseline' } },
    } as KubernetesObject);
    const { code, report } = await runJson(rb(), inv);
    expect(code).toBe(3);
    const detail = report.preflight.find((p) => p.check === 'agents')?.detail ?? '';
    expect(detail).toMatch(
      /^cannot start the node agents: node-1: the namespace kr-agent-psa refuses privileged pods \(Pod Security: .*violates PodSecurity "baseline:latest"/,
    );
    expect(detail).toContain('kubectl label namespace kr-agent-psa pod-security.kubernetes.io/enforce=privileged --overwrite');
    expect(report.faults).toEqual([]);
  });

  it("the agents' RBAC without the run Lease: the agent says which permission, and preflight quotes it", async () => {
    const manifests = parseAllDocuments((await cli(['agent', 'manifests', '-i', inventory])).stdout).map(
      (d) => d.toJS() as KubernetesObject & { rules?: { resources: string[] }[] },
    );
    const role = manifests.find((o) => o.kind === 'Role')!;
    await apply({ ...role, rules: role.rules!.filter((r) => !r.resources.includes('leases')) } as KubernetesObject);
    try {
      const { code, report } = await runJson(rb(), inventory);
      expect(code).toBe(3);
      expect(report.preflight.find((p) => p.check === 'agents')?.detail).toMatch(
        /^cannot start the node agents: node-1: the agent exited with 3: .*the agent's ServiceAccount may not get leases\.coordination\.k8s\.io in kr-agent/,
      );
      expect(report.faults).toEqual([]);
      await agentPodsGone();
    } finally {
      await apply(role);
    }
  });
});

describe('load-apiserver from: nodes over agents', () => {
  it("the node's token is in no version of any ConfigMap or pod while the load runs, and the run's identity is gone after", async () => {
    const kc = new KubeConfig();
    kc.loadFromFile(lab.kubeconfig);
    const core = kc.makeApiClient(CoreV1Api);
    const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
    // every version of every ConfigMap and pod of every namespace, as a watch delivers them: a request ConfigMap lives
    // for a moment only
    const seen: string[] = [];
    const watches = await Promise.all(
      ['/api/v1/configmaps', '/api/v1/pods'].map((path) =>
        new Watch(kc).watch(
          path,
          {},
          (_type: string, obj: unknown) => void seen.push(JSON.stringify(obj)),
          () => undefined,
        ),
      ),
    );
    const rb = runbook('agent-load-from-nodes', '30s', [
      {
        name: 'load from node-1',
        action: 'load-apiserver',
        with: { from: 'nodes', nodes: { names: ['node-1'] }, qps: 10, concurrency: 2, requests: [{ verb: 'list', resource: 'pods' }] },
      },
      { name: 'hold', wait: '5s' },
    ]);
    const running = runJson(rb, inventory);
    let done = false;
    void running.finally(() => (done = true));
    // the token as the node holds it (the lab's nodes share this machine's filesystem)
    const root = '/var/lib/kube-runbook/load';
    let token = '';
    await until(
      'the load started on node-1 with its token',
      () => {
        for (const run of existsSync(root) ? readdirSync(root) : [])
          for (const key of existsSync(join(root, run)) ? readdirSync(join(root, run)) : []) {
            const auth = join(root, run, key, 'auth');
            if (existsSync(auth))
              token = readFileSync(auth, 'utf8')
                .replace(/^Authorization: Bearer /, '')
                .trim();
          }
        return token !== '' || done;
      },
      60_000,
      100,
    );
    const { code, report, stderr } = await running;
    for (const w of watches) w.abort();
    expect(code, stderr.slice(-2000)).toBe(0);
    expect(report.faults).toEqual([expect.objectContaining({ action: 'load-apiserver', node: 'node-1', status: 'reverted' })]);
    expect(token, 'a token on node-1').toMatch(/^eyJ/);
    const requests = seen.filter((o) => o.includes('"kube-runbook/kind":"request"') && o.includes('load-apiserver start'));
    expect(requests.length, 'the start request seen by the watch').toBeGreaterThan(0);
    expect(
      seen.filter((o) => o.includes(token)),
      'the token in a ConfigMap or pod',
    ).toEqual([]);
    expect(seen.join('\n'), 'a JWT in a ConfigMap or pod').not.toMatch(/eyJ[\w-]{10,}\.eyJ[\w-]{10,}\./);
    const selector = { labelSelector: 'kube-runbook/load-identity' };
    expect((await core.listServiceAccountForAllNamespaces(selector)).items, "the load's ServiceAccount").toEqual([]);
    expect((await rbac.listClusterRole(selector)).items, "the load's ClusterRole").toEqual([]);
    await agentPodsGone('after the load');
  });
});
