/**
 * In-cluster runs: the objects of `kube-runbook manifests` applied to the lab by server-side apply, and the
 * executor run as the Job runs it — inside a node's network namespace, with nothing but the ServiceAccount's
 * token and CA mounted where the in-cluster client reads them, no kubeconfig, KUBERNETES_SERVICE_HOST/PORT set.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoordinationV1Api, CoreV1Api, KubeConfig, KubernetesObjectApi, type KubernetesObject, PatchStrategy, type V1PodSpec } from '@kubernetes/client-node';
import { parse, parseAllDocuments, stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { realClock } from '../../src/core/clock.js';
import { parseJournal } from '../../src/engine/journal.js';
import { REPO, cli, coreApi, leftovers, startLab, stopLab, until, type LabInfo } from './helpers/lab.js';

const INSTANCE = 'ic1';
const SA_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';
let lab: LabInfo;
let objects: KubernetesObjectApi;
let work: string;
let manifests: KubernetesObject[];
let runbookCopy: string;

interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

const apply = (o: KubernetesObject, dryRun?: 'All') => objects.patch(o, undefined, dryRun, 'kube-runbook-e2e', true, PatchStrategy.ServerSideApply);

/**
 * The executor as the Job's container runs it: in cp-1's network namespace (a pod on the control-plane node), a
 * mount namespace of its own where only a token and a CA are bound onto the ServiceAccount directory, no
 * kubeconfig, no HOME with one, and the apiserver as KUBERNETES_SERVICE_HOST/PORT.
 */
function runAsJob(saDir: string, args: string[]): Promise<Ran> {
  return startAsJob(saDir, args).done;
}

/** runAsJob, with the process to kill (a pod lost with its node) and its state dir (the pod's emptyDir). */
function startAsJob(saDir: string, args: string[]): { done: Promise<Ran>; kill: () => void; state: string } {
  const url = new URL(lab.apiserverUrl);
  const state = mkdtempSync(join(work, 'state-'));
  const script = [
    'set -e',
    `mkdir -p ${SA_DIR}`,
    `mount --bind "$1" ${SA_DIR}`,
    'shift',
    'exec "$@"',
  ].join('\n');
  const env = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: mkdtempSync(join(work, 'home-')),
    KUBERNETES_SERVICE_HOST: url.hostname,
    KUBERNETES_SERVICE_PORT: url.port || '443',
    KUBE_RUNBOOK_STATE_DIR: state,
  };
  const cp = lab.nodes.find((n) => n.name === 'cp-1')!;
  let kill = () => {};
  const done = new Promise<Ran>((resolve) => {
    const child = spawn(
      'ip',
      ['netns', 'exec', cp.netns, 'unshare', '-m', '--propagation', 'private', 'sh', '-c', script, 'sh', saDir, process.execPath, join(REPO, 'bin', 'kube-runbook.js'), ...args],
      { env, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    // ip netns exec, unshare and sh each exec the next: the child is the executor itself
    kill = () => child.kill('SIGKILL');
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    const cancel = realClock.setTimer(900_000, () => child.kill('SIGKILL'));
    child.on('close', (code) => {
      cancel();
      resolve({ code, stdout, stderr });
    });
  });
  return { done, kill, state };
}

beforeAll(async () => {
  lab = await startLab({ instance: INSTANCE, nodes: 3 });
  const kc = new KubeConfig();
  kc.loadFromFile(lab.kubeconfig);
  objects = KubernetesObjectApi.makeApiClient(kc);
  work = mkdtempSync(join(tmpdir(), 'kr-ic-'));

  // the shipped runbook, allowed in-cluster on this lab's apiserver (its own allowContexts name kubeconfig contexts)
  const rb = parse(readFileSync(join(REPO, 'runbooks', 'kubelet-partition.yaml'), 'utf8')) as { spec: { safety: { allowContexts: string[] } } };
  rb.spec.safety.allowContexts = [`in-cluster@${lab.apiserverUrl}`];
  runbookCopy = join(work, 'kubelet-partition.yaml');
  writeFileSync(runbookCopy, stringify(rb));

  const r = await cli(['manifests', join(REPO, 'runbooks', 'kubelet-partition.yaml'), '-i', lab.inventoryFile, '--namespace', 'kr-ic', '--report-configmap']);
  expect(r.code, r.stderr).toBe(0);
  manifests = parseAllDocuments(r.stdout).map((d) => d.toJS() as KubernetesObject);
}, 1_200_000);

afterAll(async () => {
  await stopLab(INSTANCE);
  if (work) rmSync(work, { recursive: true, force: true });
  expect(await leftovers(INSTANCE)).toEqual([]);
});

/** A token of the manifests' ServiceAccount and the cluster's CA, in a directory laid out as the kubelet mounts it. */
async function serviceAccountDir(): Promise<string> {
  const kc = new KubeConfig();
  kc.loadFromFile(lab.kubeconfig);
  const core = kc.makeApiClient(CoreV1Api);
  const sa = manifests.find((o) => o.kind === 'ServiceAccount')!;
  const token = await core.createNamespacedServiceAccountToken({
    name: sa.metadata!.name!,
    namespace: sa.metadata!.namespace!,
    body: { spec: { audiences: [], expirationSeconds: 3600 } },
  });
  const cluster = kc.getCurrentCluster()!;
  const ca = cluster.caData ? Buffer.from(cluster.caData, 'base64').toString() : readFileSync(cluster.caFile!, 'utf8');
  const dir = mkdtempSync(join(work, 'sa-'));
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'token'), token.status!.token!);
  writeFileSync(join(dir, 'ca.crt'), ca);
  writeFileSync(join(dir, 'namespace'), sa.metadata!.namespace!);
  return dir;
}

describe('in-cluster runs', () => {
  it('the manifests apply to the cluster by server-side apply (the Job as a server-side dry run: it would run in the lab)', async () => {
    for (const o of manifests) await apply(o, o.kind === 'Job' ? 'All' : undefined);
    const kinds = manifests.map((o) => o.kind);
    expect(kinds).toContain('ClusterRole');
    expect(kinds.at(-1)).toBe('Job');
  });

  it('with one rule removed from the ClusterRole, preflight names the missing permission and applies nothing', async () => {
    const role = manifests.find((o) => o.kind === 'ClusterRole') as KubernetesObject & { rules: { resources?: string[] }[] };
    const fewer = { ...role, rules: role.rules.filter((r) => !r.resources?.includes('pods')) };
    expect(fewer.rules.length).toBe(role.rules.length - 1);
    await apply(fewer);
    try {
      const r = await runAsJob(await serviceAccountDir(), ['run', runbookCopy, '-i', lab.inventoryFile, '--in-cluster', '--yes', '--output', 'json']);
      expect(r.code, r.stderr.slice(-3000)).toBe(3);
      const report = JSON.parse(r.stdout) as { status: string; faults: unknown[]; preflight: { check: string; ok: boolean; detail: string }[] };
      expect(report.status).toBe('refused');
      expect(report.preflight.find((p) => p.check === 'context')).toMatchObject({ ok: true, detail: `context "in-cluster" is allowed (server ${lab.apiserverUrl})` });
      const rbac = report.preflight.find((p) => p.check === 'rbac')!;
      expect(rbac.ok).toBe(false);
      expect(rbac.detail).toMatch(/^not allowed: list pods \(cluster-wide\) \(for [^)]*probe pod-deletions[^)]*\); watch pods \(cluster-wide\) \(for /);
      expect(report.faults).toEqual([]);
    } finally {
      await apply(role);
    }
  });

  it('the executor runs kubelet-partition as the Job would, with only the ServiceAccount: the guard aborts before any eviction, everything reverted', async () => {
    const job = manifests.find((o) => o.kind === 'Job') as KubernetesObject & { spec: { template: { spec: { containers: { args: string[] }[] } } } };
    const reportCm = job.spec.template.spec.containers[0]!.args.at(-1)!;
    expect(reportCm).toBe('kr-ic/kube-runbook-kubelet-partition-report');
    const r = await runAsJob(await serviceAccountDir(), ['run', runbookCopy, '-i', lab.inventoryFile, '--in-cluster', '--yes', '--output', 'json', '--report-configmap', reportCm]);
    const report = JSON.parse(r.stdout) as {
      status: string;
      remaining: unknown[];
      faults: { action: string; node?: string; status: string }[];
      guardFirings: { guard: string; response: string }[];
      preflight: { check: string; ok: boolean }[];
      rollback?: { complete?: boolean };
      observations: Record<string, { status?: string; detail?: string }>;
    };
    // what the runbook is for: the partition is rolled back before the first predicted eviction (exit 1: the Job
    // reports that the guard had to stop the run), with nothing left applied
    expect(r.code, r.stderr.slice(-3000)).toBe(1);
    expect(report.preflight.every((p) => p.ok)).toBe(true);
    expect(report.guardFirings.some((g) => g.guard === 'eviction forecast' && g.response === 'abort')).toBe(true);
    expect(report.faults.map((f) => `${f.action} ${f.status}`)).toEqual(['block-kubelet-egress reverted']);
    expect(report.remaining).toEqual([]);
    expect(report.rollback?.complete).toBe(true);
    expect(report.observations['pods deleted']?.detail).toBe('no pod deleted');
    // the same report, in the ConfigMap the Job's ServiceAccount may write
    const kc = new KubeConfig();
    kc.loadFromFile(lab.kubeconfig);
    const cm = await kc.makeApiClient(CoreV1Api).readNamespacedConfigMap({ namespace: 'kr-ic', name: 'kube-runbook-kubelet-partition-report' });
    expect(JSON.parse(cm.data!['report.json']!)).toEqual(report);
  });

  it("the Job's pod passes the namespace's restricted Pod Security admission; the same pod without its securityContext does not", async () => {
    const job = manifests.find((o) => o.kind === 'Job') as KubernetesObject & { spec: { template: { spec: V1PodSpec } } };
    const namespace = job.metadata!.namespace!;
    const spec = job.spec.template.spec;
    const pod = (s: V1PodSpec) => ({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'kr-restricted-check', namespace }, spec: s });
    const core = coreApi(lab);
    // what the Job controller creates from the template, as a server-side dry run: admitted
    await core.createNamespacedPod({ namespace, body: pod(spec), dryRun: 'All' });
    // the admission is on and judges it: a pod without the securityContext is refused
    const bare = { ...spec, securityContext: undefined, containers: spec.containers.map((c) => ({ ...c, securityContext: undefined })) };
    const refused = await core.createNamespacedPod({ namespace, body: pod(bare), dryRun: 'All' }).then(
      () => ({ code: 201, message: 'admitted' }),
      (e: { code?: number; body?: string }) => ({ code: e.code, message: (JSON.parse(e.body ?? '{}') as { message?: string }).message ?? '' }),
    );
    expect(refused.code).toBe(403);
    expect(refused.message).toMatch(/is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false/);
  });

  it('the journal survives the pod: the executor killed after its fault and its disk gone, recover --from-cluster finds the run and reverts it', async () => {
    const job = manifests.find((o) => o.kind === 'Job') as KubernetesObject & { spec: { template: { spec: { containers: { args: string[] }[] } } } };
    const args = job.spec.template.spec.containers[0]!.args;
    const journalCm = args[args.indexOf('--journal-configmap') + 1]!;
    expect(journalCm).toBe('kr-ic/kube-runbook-kubelet-partition-journal');
    const [namespace, name] = journalCm.split('/') as [string, string];
    const core = coreApi(lab);
    const journals = async () => (await core.readNamespacedConfigMap({ namespace, name })).data ?? {};
    // the run before cut node-1 off: its taint outlives the revert by a few seconds, and a run started meanwhile is
    // aborted at once by its eviction forecast, before anything is applied
    await until(
      'every node Ready and untainted',
      async () =>
        (await core.listNode()).items.every(
          (n) => n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') && !(n.spec?.taints ?? []).some((t) => t.effect === 'NoExecute'),
        ),
      120_000,
      500,
    );
    const sa = await serviceAccountDir();
    const run = startAsJob(sa, ['run', runbookCopy, '-i', lab.inventoryFile, '--in-cluster', '--yes', '--output', 'json', '--journal-configmap', journalCm]);
    // the pod goes (its node lost: no SIGTERM, no rollback) once its fault is applied, and its emptyDir with it
    let runId = '';
    let applied = false;
    // a run that ends before its fault is in the ConfigMap fails the test with its own words
    const endedEarly = run.done.then((r) => {
      if (!applied) throw new Error(`the run ended (exit ${r.code}) before its fault was in the journal ConfigMap:\n${r.stderr.slice(-3000)}`);
    });
    await Promise.race([
      until(
        'the applied fault in the journal ConfigMap',
        async () => {
          for (const [key, text] of Object.entries(await journals())) if (text.includes('"type":"applied"')) runId = key.replace(/\.jsonl$/, '');
          return (applied = runId !== '');
        },
        120_000,
      ),
      endedEarly,
    ]);
    run.kill();
    const killed = await run.done;
    expect(killed.code, killed.stderr.slice(-2000)).toBe(null);
    rmSync(run.state, { recursive: true, force: true });
    const fault = parseJournal((await journals())[`${runId}.jsonl`]!, journalCm).faults;
    expect(fault.map((f) => [f.prepared.action, f.applied, f.reverted])).toEqual([['block-kubelet-egress', true, false]]);

    // a new pod of the same ServiceAccount, with an empty state dir, finds the run from the cluster's copy; the lock
    // was renewed seconds ago, so it cannot tell the run dead and refuses, until whoever saw the pod go says so
    const early = await runAsJob(sa, ['recover', '--in-cluster', '--from-cluster', journalCm]);
    expect(early.code, early.stderr.slice(-3000)).toBe(2);
    expect(early.stderr).toContain(`run ${runId} is still in progress: its executor`);
    const r = await runAsJob(sa, ['recover', '--in-cluster', '--from-cluster', journalCm, '--force']);
    expect(r.code, r.stderr.slice(-3000)).toBe(0);
    expect(r.stdout).toContain(`Run ${runId} (kubelet-partition`);
    expect(r.stdout).toMatch(/1 fault\(s\) to revert[\s\S]*all 1 reverted/);
    const after = parseJournal((await journals())[`${runId}.jsonl`]!, journalCm);
    expect(after.faults.map((f) => [f.prepared.action, f.reverted])).toEqual([['block-kubelet-egress', true]]);
    expect(after.status).toBe('interrupted');
    // the node's kubelet reaches the apiserver again: its Lease is renewed after the revert
    const node = fault[0]!.prepared.node!;
    const leases = new KubeConfig();
    leases.loadFromFile(lab.kubeconfig);
    const coordination = leases.makeApiClient(CoordinationV1Api);
    const reverted = realClock.now();
    await until('a renewal of the cut-off node\'s Lease', async () => {
      const lease = await coordination.readNamespacedLease({ namespace: 'kube-node-lease', name: node });
      return new Date(lease.spec!.renewTime!).getTime() > reverted;
    }, 30_000);
    // and a second recover finds nothing left of it
    const again = await runAsJob(sa, ['recover', '--in-cluster', '--from-cluster', journalCm]);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain('Nothing to recover');
  });
});
