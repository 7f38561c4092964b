/**
 * In-cluster runs, as a user runs them: the objects of `kube-runbook manifests` applied to a lab of real nodes
 * (`--nodes 0 --real-nodes 2`) by server-side apply, and each Job's pod run by a real kubelet and containerd from the
 * executor image the lab built and imported (present, never pulled), with nothing but its ServiceAccount. Over ssh
 * (the key from a Secret, to an sshd in rnode-1's network namespace) the Job cuts rnode-1's kubelet off and its guard
 * rolls the partition back; through node agents it starts an agent pod on rnode-1, is killed, and a recover Job
 * reverts its fault from the journal the run kept in the cluster (its run lock in its own namespace). Then the Job holds
 * that fault beside a local `kube-runbook run` (its lock in kube-system) holding one on rnode-2, and one `halt`, the
 * cluster's, rolls both back within seconds, as the nodes show it (test/e2e/halt.test.ts has two local runs halted on
 * two clusters at once). A Job's log is its run, its exit code its outcome.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  BatchV1Api,
  CoreV1Api,
  KubeConfig,
  KubernetesObjectApi,
  type KubernetesObject,
  PatchStrategy,
  type V1Pod,
  type V1PodSpec,
} from '@kubernetes/client-node';
import { parse, parseAllDocuments, stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toolVersion } from '../../src/core/version.js';
import { parseJournal } from '../../src/journal/journal.js';
import { JournalKey } from '../../src/journal/key.js';
import { SERVICE_IP } from '../../packages/lab/src/host/pki.js';
import { LAB_AGENT_GROUP } from '../../packages/lab/src/host/paths.js';
import { agentPodsGone } from './helpers/agents.js';
import { applied, type HaltLab, haltedAt, revertTimes, type Run, startRun } from './helpers/halt-lab.js';
import { REPO, cli, leftovers, startLab, stopLab, until, type LabInfo } from './helpers/lab.js';

const INSTANCE = 'ic1';
const NS = 'kr-ic';
const AGENT_NS = 'kr-agent';
const SSH_SECRET = 'kube-runbook-ssh';
/** The executor's image as the lab imports it into its real nodes: under `localhost/`, which no registry serves. */
const IMAGE = `localhost/kube-runbook/kube-runbook:${toolVersion()}`;
/** The context a pod's run is in: the apiserver at the `kubernetes` Service's address. */
const IN_CLUSTER = `in-cluster@https://${SERVICE_IP}:443`;

type Job = KubernetesObject & { metadata: { name: string; namespace: string }; spec: { template: { spec: V1PodSpec } } };
interface Finished {
  /** The Job's condition: Complete or Failed. */
  outcome: string;
  pod: V1Pod;
  exitCode?: number;
  log: string;
}
interface Report {
  runId: string;
  status: string;
  remaining: unknown[];
  faults: { action: string; node?: string; status: string }[];
  guardFirings: { guard: string; response: string }[];
  preflight: { check: string; ok: boolean; detail: string }[];
  rollback?: { complete?: boolean };
  observations: Record<string, { status?: string; detail?: string }>;
}

let lab: LabInfo;
let core: CoreV1Api;
let batch: BatchV1Api;
let objects: KubernetesObjectApi;
let work: string;
let sshd: ChildProcess | undefined;
let madePrivsepDir = false;
/** `manifests` of kubelet-partition (rnode-1 over ssh) and of a runbook that marks rnode-1 (through an agent). */
let partition: KubernetesObject[];
let mark: KubernetesObject[];
let markFile: string;
/** A local run's: a runbook that marks rnode-2 through its agent, locked in kube-system, and its lab. */
let local: HaltLab;
let localRunbook: string;
let localMark: string;
let localRun: Run | undefined;

const apply = (o: KubernetesObject) => objects.patch(o, undefined, undefined, 'kube-runbook-e2e', true, PatchStrategy.ServerSideApply);
const jobOf = (docs: KubernetesObject[]) => docs.find((o) => o.kind === 'Job') as Job;
const argAfter = (job: Job, flag: string) => {
  const args = job.spec.template.spec.containers[0]!.args!;
  return args[args.indexOf(flag) + 1]!;
};
/** The same Job under another name (a Job's template cannot change), running `args`. */
function variant(job: Job, suffix: string, args?: string[]): Job {
  const j = structuredClone(job);
  j.metadata.name = `${job.metadata.name}-${suffix}`;
  if (args) j.spec.template.spec.containers[0]!.args = args;
  return j;
}

/**
 * The report the run printed on stdout. Read from the container's log as the kubelet wrote it (CRI format:
 * `<time> <stream> <P|F> <text>`, P a part of a line), its stdout lines only: the API's log of the pod merges stderr,
 * whose progress lines may land in the middle of the report.
 */
function reportOf(r: Finished): Report {
  const pod = r.pod;
  const dir = join(
    lab.stateDir,
    'nodes',
    pod.spec!.nodeName!,
    'pod-logs',
    `${NS}_${pod.metadata!.name}_${pod.metadata!.uid}`,
    'kube-runbook',
  );
  let stdout = '';
  for (const f of readdirSync(dir)
    .filter((x) => x.endsWith('.log'))
    .sort())
    for (const line of readFileSync(join(dir, f), 'utf8').split('\n')) {
      const m = /^\S+ stdout ([PF]) (.*)$/.exec(line);
      if (m) stdout += m[1] === 'F' ? `${m[2]}\n` : m[2];
    }
  const json = /^\{\n[\s\S]*?\n\}$/m.exec(stdout);
  if (!json) throw new Error(`no report on the Job's stdout:\n${stdout.slice(-3000)}\nits log:\n${r.log.slice(-3000)}`);
  return JSON.parse(json[0]) as Report;
}

const podOf = async (job: string) => (await core.listNamespacedPod({ namespace: NS, labelSelector: `job-name=${job}` })).items[0];

/** Complete or Failed, once the Job is; else ''. */
const outcomeOf = async (job: Job): Promise<string> =>
  (await batch.readNamespacedJob({ namespace: NS, name: job.metadata.name })).status?.conditions?.find(
    (c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True',
  )?.type ?? '';

/** Waits for the Job to be Complete or Failed; its pod, the container's exit code and the pod's log. */
async function finished(job: Job): Promise<Finished> {
  let outcome = '';
  await until(`Job ${job.metadata.name} Complete or Failed`, async () => (outcome = await outcomeOf(job)) !== '', 300_000, 500);
  const pod = (await podOf(job.metadata.name))!;
  const log = await core.readNamespacedPodLog({ namespace: NS, name: pod.metadata!.name!, container: 'kube-runbook' });
  return { outcome, pod, exitCode: pod.status?.containerStatuses?.[0]?.state?.terminated?.exitCode, log };
}

async function runJob(job: Job): Promise<Finished> {
  await apply(job);
  return finished(job);
}

/** The pod of a Job once its container runs. */
const running = async (job: Job): Promise<V1Pod> => {
  let pod: V1Pod | undefined;
  await until(
    `a running pod of Job ${job.metadata.name}`,
    async () => (pod = await podOf(job.metadata.name))?.status?.containerStatuses?.[0]?.state?.running !== undefined,
    120_000,
  );
  return pod!;
};

/** The processes of a container, by its cgroup (which names its id). */
function containerPids(id: string): number[] {
  const cgroupOf = (pid: string) => {
    try {
      return readFileSync(`/proc/${pid}/cgroup`, 'utf8');
    } catch {
      return '';
    }
  };
  return readdirSync('/proc')
    .filter((p) => /^\d+$/.test(p) && cgroupOf(p).includes(id))
    .map(Number);
}

/** OpenSSH's server, from Debian when this machine lacks it (without starting the system's own). */
function ensureSshd(): void {
  if (existsSync('/usr/sbin/sshd')) return;
  const policy = '/usr/sbin/policy-rc.d';
  const madePolicy = !existsSync(policy);
  if (madePolicy) writeFileSync(policy, '#!/bin/sh\nexit 101\n', { mode: 0o755 });
  try {
    const r = spawnSync('apt-get', ['install', '-y', '--no-install-recommends', 'openssh-server'], {
      env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
      encoding: 'utf8',
    });
    if (r.status !== 0) throw new Error(`cannot install openssh-server with apt-get: ${r.stderr.slice(-2000)}`);
  } finally {
    if (madePolicy) rmSync(policy, { force: true });
  }
}

const accepts = (host: string, port: number) =>
  new Promise<boolean>((resolve) => {
    const s = connect({ host, port });
    s.once('connect', () => (s.destroy(), resolve(true)));
    s.once('error', () => resolve(false));
  });

/**
 * An sshd in rnode-1's network namespace, on its address, port 22, letting in root with the client key only: the
 * node's ssh as the Job reaches it. Returns the key and the known_hosts line, the Secret's content.
 */
async function startSshd(): Promise<{ key: string; knownHosts: string }> {
  ensureSshd();
  const node = lab.nodes.find((n) => n.name === 'rnode-1')!;
  const dir = join(work, 'sshd');
  mkdirSync(dir);
  const file = (f: string) => join(dir, f);
  for (const k of ['host_key', 'client_key']) {
    const r = spawnSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', k, '-f', file(k)], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`ssh-keygen: ${r.stderr}`);
  }
  writeFileSync(file('authorized_keys'), readFileSync(file('client_key.pub')));
  if (!existsSync('/run/sshd')) {
    mkdirSync('/run/sshd', { mode: 0o755 });
    madePrivsepDir = true;
  }
  const config = [
    'Port 22',
    `ListenAddress ${node.ip}`,
    `HostKey ${file('host_key')}`,
    `PidFile ${file('sshd.pid')}`,
    `AuthorizedKeysFile ${file('authorized_keys')}`,
    'AllowUsers root',
    'PermitRootLogin prohibit-password',
    'StrictModes no',
    'UsePAM no',
    'PasswordAuthentication no',
    'KbdInteractiveAuthentication no',
    'AllowTcpForwarding no',
    'X11Forwarding no',
    'PrintMotd no',
    'LogLevel ERROR',
    '',
  ];
  writeFileSync(file('sshd_config'), config.join('\n'));
  let log = '';
  const d = spawn('ip', ['netns', 'exec', node.netns, '/usr/sbin/sshd', '-D', '-e', '-f', file('sshd_config')], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  sshd = d;
  d.stderr.on('data', (b: Buffer) => (log += b.toString()));
  await until(`sshd listening on ${node.ip}:22`, () => d.exitCode === null && accepts(node.ip, 22), 10_000, 100).catch((e: unknown) => {
    throw new Error(`${String(e)}: ${log}`);
  });
  const [type, key] = readFileSync(file('host_key.pub'), 'utf8').trim().split(' ');
  return { key: readFileSync(file('client_key'), 'utf8'), knownHosts: `${node.ip} ${type} ${key}\n` };
}

/** The lab's inventory with `node` reached as `transport` says, beside the lab's own (its kubeconfig is named relative to it). */
function inventoryWith(name: string, transport: Record<string, unknown>, node = 'rnode-1'): string {
  const inv = parse(readFileSync(lab.inventoryFile, 'utf8')) as { spec: { nodes: { name: string; transport?: unknown }[] } };
  for (const n of inv.spec.nodes) if (n.name === node) n.transport = transport;
  const file = join(lab.stateDir, `${name}.yaml`);
  writeFileSync(file, stringify(inv));
  return file;
}

async function manifestsOf(runbook: string, inventory: string, extra: string[]): Promise<KubernetesObject[]> {
  const r = await cli(['manifests', runbook, '-i', inventory, '--namespace', NS, '--image', IMAGE, ...extra]);
  expect(r.code, r.stderr).toBe(0);
  return parseAllDocuments(r.stdout).map((d) => d.toJS() as KubernetesObject);
}

let secret: { key: string; knownHosts: string };

beforeAll(async () => {
  // a 20 s toleration (the lab's default is 30 s): the partition's guard fires 10 s sooner, with the same margin
  lab = await startLab({ instance: INSTANCE, nodes: 0, realNodes: 2, toleration: '20s' });
  const kc = new KubeConfig();
  kc.loadFromFile(lab.kubeconfig);
  core = kc.makeApiClient(CoreV1Api);
  batch = kc.makeApiClient(BatchV1Api);
  objects = KubernetesObjectApi.makeApiClient(kc);
  work = mkdtempSync(join(tmpdir(), 'kr-ic-'));
  secret = await startSshd();

  // the shipped runbook, allowed in-cluster on this lab (its own allowContexts name kubeconfig contexts)
  const rb = parse(readFileSync(join(REPO, 'runbooks', 'kubelet-partition.yaml'), 'utf8')) as {
    spec: { safety: { allowContexts: string[] } };
  };
  rb.spec.safety.allowContexts = [IN_CLUSTER];
  const partitionFile = join(work, 'kubelet-partition.yaml');
  writeFileSync(partitionFile, stringify(rb));
  const viaSsh = inventoryWith('inventory-ssh', {
    type: 'ssh',
    user: 'root',
    identityFile: '/etc/kube-runbook-ssh/id_ed25519',
    knownHostsFile: '/etc/kube-runbook-ssh/known_hosts',
  });

  // a file of this machine made on a node by an agent (which enters the host's mount namespace), held a minute: the
  // Job's on rnode-1, its run lock in its own namespace; a local run's on rnode-2, its run lock in kube-system
  const marking = (node: string, file: string, name: string, lockNamespace?: string) => {
    const steps = [
      { name: `mark ${node}`, action: 'run-command', with: { nodes: { names: [node] }, apply: `touch ${file}`, revert: `rm -f ${file}` } },
      { name: 'hold', wait: '60s' },
    ];
    const safety = { allowContexts: [IN_CLUSTER, 'lab-*'], maxDuration: '5m', faultTtl: '3m', ...(lockNamespace ? { lockNamespace } : {}) };
    const runbook = join(work, `${name}.yaml`);
    writeFileSync(runbook, stringify({ apiVersion: 'kube-runbook/v1', kind: 'Runbook', metadata: { name }, spec: { safety, steps } }));
    return runbook;
  };
  markFile = join(work, 'mark');
  const markRunbook = marking('rnode-1', markFile, 'mark-rnode-1', NS);
  localMark = join(work, 'mark-2');
  localRunbook = marking('rnode-2', localMark, 'mark-rnode-2');
  const agent = { type: 'agent', namespace: AGENT_NS, enter: 'mount', startTimeout: '45s', runAsGroup: LAB_AGENT_GROUP };
  const viaAgent = inventoryWith('inventory-agent', agent);
  local = {
    lab,
    inventory: inventoryWith('inventory-agent-2', agent, 'rnode-2'),
    work,
    env: { ...process.env, KUBE_RUNBOOK_STATE_DIR: join(work, 'local-state'), NO_COLOR: '1' },
  };

  // the agents read the cluster's halt, and the one of the Job's lock namespace
  const agents = cli(['agent', 'manifests', '-i', viaAgent, '--halt-namespace', NS]);
  [partition, mark] = await Promise.all([
    manifestsOf(partitionFile, viaSsh, ['--report-configmap', '--ssh-secret', SSH_SECRET]),
    manifestsOf(markRunbook, viaAgent, []),
  ]);
  const a = await agents;
  expect(a.code, a.stderr).toBe(0);
  for (const d of parseAllDocuments(a.stdout)) await apply(d.toJS() as KubernetesObject);
}, 1_200_000);

afterAll(async () => {
  if (localRun && localRun.child.exitCode === null && localRun.child.signalCode === null) localRun.child.kill('SIGKILL');
  if (sshd && sshd.exitCode === null) {
    const gone = new Promise((r) => sshd!.once('exit', r));
    sshd.kill('SIGTERM');
    await gone;
  }
  if (madePrivsepDir) rmSync('/run/sshd', { recursive: true, force: true });
  await stopLab(INSTANCE);
  if (work) rmSync(work, { recursive: true, force: true });
  expect(await leftovers(INSTANCE)).toEqual([]);
});

describe('in-cluster runs: the Job of `kube-runbook manifests` as a pod of a real node', () => {
  it("the manifests apply by server-side apply; the Job's pod runs on the node it does not cut, from the lab's image, with its ssh key readable by it alone", async () => {
    const [namespace] = partition;
    expect(namespace).toMatchObject({ kind: 'Namespace', metadata: { name: NS } });
    await apply(namespace!);
    await core.createNamespacedSecret({
      namespace: NS,
      body: { metadata: { name: SSH_SECRET }, stringData: { id_ed25519: secret.key, known_hosts: secret.knownHosts } },
    });
    for (const o of [...partition, ...mark]) if (o.kind !== 'Job') await apply(o);
    expect(partition.map((o) => o.kind)).toContain('ClusterRole');
    expect(partition.at(-1)?.kind).toBe('Job');

    // the run of kubelet-partition starts here, and the next tests run beside it (its result is the fourth's)
    const job = jobOf(partition);
    expect(job.spec.template.spec.containers[0]!.image).toBe(IMAGE);
    await apply(job);
    const pod = await running(job);
    // kept off the node it cuts, by the manifests' node affinity
    expect(pod.spec?.nodeName).toBe('rnode-2');
    expect(pod.status?.containerStatuses?.[0]?.imageID).toMatch(/^sha256:[0-9a-f]{64}$/);
    // no registry was asked: the image is the one the lab imported (a pull of localhost/ would fail)
    const events = (await core.listNamespacedEvent({ namespace: NS, fieldSelector: `involvedObject.name=${pod.metadata!.name!}` })).items;
    expect(events.filter((e) => e.reason === 'Pulled').map((e) => e.message)).toEqual([
      `Container image "${IMAGE}" already present on machine and can be accessed by the pod`,
    ]);
    // the ssh key as the executor (uid 1000, group 1000) sees it: root's, readable by its group (fsGroup) and by
    // nobody else; OpenSSH checks a key's mode only when the user reading it owns it
    const key = statSync(
      join(
        lab.stateDir,
        'nodes',
        'rnode-2',
        'kubelet-root',
        'pods',
        pod.metadata!.uid!,
        'volumes',
        'kubernetes.io~secret',
        'ssh',
        'id_ed25519',
      ),
    );
    expect({ mode: (key.mode & 0o777).toString(8), uid: key.uid, gid: key.gid }).toEqual({ mode: '440', uid: 0, gid: 1000 });
  });

  it('with one rule removed from its ClusterRole, a Job is refused at preflight (exit 3: Failed), naming the missing permission', async () => {
    // the other runbook's: the partition's run goes on meanwhile, and a refused run takes no run lock
    const role = mark.find((o) => o.kind === 'ClusterRole') as KubernetesObject & { rules: { resources?: string[] }[] };
    const fewer = { ...role, rules: role.rules.filter((r) => !r.resources?.includes('pods')) };
    expect(fewer.rules.length).toBe(role.rules.length - 1);
    await apply(fewer);
    try {
      const r = await runJob(variant(jobOf(mark), 'rbac'));
      expect(r.exitCode, r.log.slice(-3000)).toBe(3);
      expect(r.outcome).toBe('Failed');
      const report = reportOf(r);
      expect(report.status).toBe('refused');
      expect(report.preflight.find((p) => p.check === 'context')).toMatchObject({
        ok: true,
        detail: `context "in-cluster" is allowed (server https://${SERVICE_IP}:443)`,
      });
      const rbac = report.preflight.find((p) => p.check === 'rbac')!;
      expect(rbac.ok).toBe(false);
      expect(rbac.detail).toBe(
        'not allowed: list pods (cluster-wide) (for observer pod-deletions, observer eviction-forecast); watch pods (cluster-wide) (for observer pod-deletions, observer eviction-forecast)',
      );
      expect(report.faults).toEqual([]);
    } finally {
      await apply(role);
    }
  });

  it("the Job's pod passes the namespace's restricted Pod Security admission; the same pod without its securityContext does not", async () => {
    const spec = jobOf(partition).spec.template.spec;
    const pod = (s: V1PodSpec) => ({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'kr-restricted-check', namespace: NS }, spec: s });
    await core.createNamespacedPod({ namespace: NS, body: pod(spec), dryRun: 'All' });
    const bare = { ...spec, securityContext: undefined, containers: spec.containers.map((c) => ({ ...c, securityContext: undefined })) };
    const refused = await core.createNamespacedPod({ namespace: NS, body: pod(bare), dryRun: 'All' }).then(
      () => ({ code: 201, message: 'admitted' }),
      (e: { code?: number; body?: string }) => ({
        code: e.code,
        message: (JSON.parse(e.body ?? '{}') as { message?: string }).message ?? '',
      }),
    );
    expect(refused.code).toBe(403);
    expect(refused.message).toMatch(/is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false/);
  });

  it('over ssh, the Job ran kubelet-partition: its guard aborted before any eviction, everything reverted, exit 1 (Failed), the run in its log', async () => {
    const job = jobOf(partition);
    const r = await finished(job);
    expect(r.exitCode, r.log.slice(-3000)).toBe(1);
    expect(r.outcome).toBe('Failed');
    // the log is the run: its progress, then its report
    expect(r.log).toMatch(/preflight ok {3}nodes: 1 node\(s\) reachable/);
    expect(r.log).toMatch(/applied block-kubelet-egress on rnode-1/);
    expect(r.log).toMatch(/⚑ guard eviction forecast → abort/);
    expect(r.log).toMatch(/↺ rollback complete/);
    const report = reportOf(r);
    // what the runbook is for: the partition is rolled back before the first predicted eviction, nothing left applied
    expect(report.preflight.every((p) => p.ok)).toBe(true);
    expect(report.guardFirings.some((g) => g.guard === 'eviction forecast' && g.response === 'abort')).toBe(true);
    expect(report.faults.map((f) => `${f.action} ${f.node} ${f.status}`)).toEqual(['block-kubelet-egress rnode-1 reverted']);
    expect(report.remaining).toEqual([]);
    expect(report.rollback?.complete).toBe(true);
    expect(report.observations['pods deleted']?.detail).toBe('no pod deleted');
    // the same report, in the ConfigMap the Job's ServiceAccount may write
    const [namespace, name] = argAfter(job, '--report-configmap').split('/') as [string, string];
    const cm = await core.readNamespacedConfigMap({ namespace, name });
    expect(JSON.parse(cm.data!['report.json']!)).toEqual(report);
    // rendered again from a workstation: the ConfigMap's report and the log's give the same timeline and JUnit
    const logged = join(work, 'logged-report.json');
    writeFileSync(logged, JSON.stringify(report));
    const out = (from: string, ext: string) => join(work, `${from}.${ext}`);
    const [fromCm, fromLog] = await Promise.all([
      cli([
        'report',
        '--from-configmap',
        `${namespace}/${name}`,
        '--kubeconfig',
        lab.kubeconfig,
        '--context',
        lab.context,
        '--html',
        out('cm', 'html'),
        '--junit',
        out('cm', 'xml'),
      ]),
      cli(['report', logged, '--html', out('log', 'html'), '--junit', out('log', 'xml')]),
    ]);
    expect([fromCm.code, fromLog.code], `${fromCm.stderr}${fromLog.stderr}`).toEqual([0, 0]);
    expect(readFileSync(out('cm', 'html'), 'utf8')).toBe(readFileSync(out('log', 'html'), 'utf8'));
    expect(readFileSync(out('cm', 'xml'), 'utf8')).toBe(readFileSync(out('log', 'xml'), 'utf8'));
    expect(readFileSync(out('cm', 'html'), 'utf8')).toContain('eviction forecast');
  });

  it('through agents, the Job starts an agent pod on rnode-1; killed after its fault with its disk gone, a recover Job finds the run in the cluster and reverts it', async () => {
    const job = jobOf(mark);
    const journalCm = argAfter(job, '--journal-configmap');
    expect(journalCm).toBe(`${NS}/kube-runbook-mark-rnode-1-journal`);
    const [namespace, name] = journalCm.split('/') as [string, string];
    const journals = async () => (await core.readNamespacedConfigMap({ namespace, name })).data ?? {};
    await apply(job);
    let runId = '';
    await until(
      'the applied fault in the journal ConfigMap',
      async () => {
        for (const [k, text] of Object.entries(await journals())) if (text.includes('"type":"applied"')) runId = k.replace(/\.jsonl$/, '');
        if (runId === '' && (await outcomeOf(job)))
          throw new Error(`the run ended before its fault was in the journal ConfigMap:\n${(await finished(job)).log.slice(-3000)}`);
        return runId !== '';
      },
      120_000,
      250,
    );
    expect(existsSync(markFile), 'the mark made on rnode-1').toBe(true);
    const agentPods = (await core.listNamespacedPod({ namespace: AGENT_NS })).items;
    expect(agentPods.map((p) => [p.spec?.nodeName, p.status?.phase])).toEqual([['rnode-1', 'Running']]);
    expect(agentPods[0]!.status?.containerStatuses?.[0]?.containerID).toMatch(/^containerd:\/\/[0-9a-f]{64}$/);

    // the pod lost with its node: its container's processes SIGKILLed (no SIGTERM, no rollback), then the pod and its
    // emptyDir deleted
    const pod = (await podOf(job.metadata.name))!;
    expect(pod.spec?.nodeName).toBe('rnode-2');
    const pids = containerPids(pod.status!.containerStatuses![0]!.containerID!.replace(/^containerd:\/\//, ''));
    expect(pids.length).toBeGreaterThan(0);
    for (const p of pids) process.kill(p, 'SIGKILL');
    const killed = await finished(job);
    expect(killed.exitCode).toBe(137);
    expect(killed.outcome).toBe('Failed');
    await core.deleteNamespacedPod({ namespace: NS, name: pod.metadata!.name!, gracePeriodSeconds: 0 });
    const copy = await journals();
    const fault = parseJournal(copy[`${runId}.jsonl`]!, journalCm).faults;
    // signed with the key the run drew into the Secret the manifests created empty
    const key = (await core.readNamespacedSecret({ namespace, name: `${name}-key` })).data?.key ?? '';
    expect(
      new JournalKey(Buffer.from(key, 'base64')).verifies({ namespace, name }, runId, copy[`${runId}.jsonl`]!, copy[`${runId}.hmac`]!),
    ).toBe(true);
    expect(fault.map((f) => [f.prepared.action, f.prepared.node, f.applied, f.reverted])).toEqual([
      ['run-command', 'rnode-1', true, false],
    ]);
    expect(existsSync(markFile)).toBe(true);

    // recover from a workstation, with an empty state dir, finds the run in the cluster's copy; the lock was renewed
    // seconds ago, so it cannot tell the run dead and refuses (exit 2), until whoever saw the pod go says so
    const early = await cli([
      'recover',
      '--from-cluster',
      journalCm,
      '--kubeconfig',
      lab.kubeconfig,
      '--context',
      lab.context,
      '--state-dir',
      mkdtempSync(join(work, 'state-')),
    ]);
    expect(early.code, early.stderr.slice(-3000)).toBe(2);
    expect(early.stderr).toContain(`run ${runId} is still in progress: its executor`);
    // so says a recover Job: a pod of the run's ServiceAccount, its own state dir empty too
    const r = await runJob(variant(job, 'recover', ['recover', '--in-cluster', '--from-cluster', journalCm, '--force']));
    expect(r.exitCode, r.log.slice(-3000)).toBe(0);
    expect(r.outcome).toBe('Complete');
    expect(r.log).toContain(`Run ${runId} (mark-rnode-1`);
    expect(r.log).toMatch(/1 fault\(s\) to revert[\s\S]*all 1 reverted/);
    expect(existsSync(markFile), 'the mark removed from rnode-1').toBe(false);
    // what it reverted went back to the ConfigMap: the run is not taken again
    const after = parseJournal((await journals())[`${runId}.jsonl`]!, journalCm);
    expect(after.faults.map((f) => [f.prepared.action, f.reverted])).toEqual([['run-command', true]]);
    expect(after.status).toBe('interrupted');
  });

  it("one halt, the cluster's, rolls back the Job (locked in its namespace) and a local run (locked in kube-system) at once: each fault gone within 5 s, as its node shows it", async () => {
    const cluster = ['--kubeconfig', lab.kubeconfig, '--context', lab.context];
    const job = variant(jobOf(mark), 'halt');
    await apply(job);
    localRun = startRun(local, localRunbook);
    const marked = (file: string, what: string) =>
      until(
        `the mark made on ${what}`,
        async () => existsSync(file) || (await outcomeOf(job)) !== '' || localRun!.child.exitCode !== null,
        120_000,
        100,
      );
    await Promise.all([marked(markFile, 'rnode-1'), marked(localMark, 'rnode-2'), applied(localRun, 1)]);
    expect(existsSync(markFile), `the Job's mark on rnode-1; the Job: ${await outcomeOf(job)}`).toBe(true);
    expect(existsSync(localMark), `the local run's mark on rnode-2:\n${localRun.out().slice(-3000)}`).toBe(true);
    const agentPods = (await core.listNamespacedPod({ namespace: AGENT_NS })).items;
    expect(agentPods.map((p) => p.spec?.nodeName).sort()).toEqual(['rnode-1', 'rnode-2']);
    // each agent follows the cluster's halt, and the Job's its lock namespace's too
    const haltArgs = (node: string) => {
      const args = agentPods.find((p) => p.spec?.nodeName === node)!.spec!.containers[0]!.args!;
      return args.flatMap((a, i) => (args[i - 1] === '--halt-namespace' ? [a] : []));
    };
    expect([haltArgs('rnode-1'), haltArgs('rnode-2')]).toEqual([['kube-system', NS], ['kube-system']]);

    // the nodes read every 100 ms from before the halt: the marks are files of this machine, which the agents' scripts
    // reach through the host's mount namespace
    const faults = [
      { faultId: 'job', action: 'run-command', node: 'rnode-1', state: { file: markFile } },
      { faultId: 'local', action: 'run-command', node: 'rnode-2', state: { file: localMark } },
    ];
    const reading = revertTimes(local, faults, 30_000, async (f) => existsSync(String(f.state.file)));
    const halt = await cli(['halt', '--reason', 'e2e outage', '--by', 'e2e@lab', ...cluster]);
    expect(halt.code, `${halt.stdout}\n${halt.stderr}`).toBe(0);
    expect(halt.stdout).toMatch(/^halted by e2e@lab since \S+ \(Lease kube-system\/kube-runbook-halt\): e2e outage: every run rolls back/);
    const at = haltedAt(halt.stdout);
    const gone = await reading;
    const took = faults.map((f) => (gone.get(f.faultId) ?? Infinity) - at);
    console.log(
      `one halt, in-cluster Job and local run: faults gone after the halt, as the nodes show them: Job (lock ${NS}) on rnode-1 ${(took[0]! / 1000).toFixed(2)} s, local run (lock kube-system) on rnode-2 ${(took[1]! / 1000).toFixed(2)} s`,
    );
    for (const [i, f] of faults.entries()) {
      expect(took[i], `${f.faultId}'s fault gone from ${f.node} after the halt (ms)`).toBeGreaterThan(0);
      expect(took[i], `${f.faultId}'s fault gone from ${f.node} after the halt (ms)`).toBeLessThanOrEqual(5_000);
    }

    // both end HALTED (exit 1), naming the cluster's halt; their agents gone
    const halted = /HALTED: halted by e2e@lab since \S+ \(Lease kube-system\/kube-runbook-halt\): e2e outage/;
    const r = await finished(job);
    expect(r.exitCode, r.log.slice(-3000)).toBe(1);
    expect(r.outcome).toBe('Failed');
    expect(r.log).toMatch(halted);
    expect(reportOf(r)).toMatchObject({ status: 'halted', remaining: [] });
    expect(await localRun.exit, localRun.out().slice(-3000)).toBe(1);
    expect(localRun.out()).toMatch(halted);
    await agentPodsGone(lab, '', 60_000);

    // a new run is refused (exit 3) naming who halted, when and why; resumed, a dry run passes preflight
    const refused = await cli(['run', localRunbook, '-i', local.inventory, '--yes'], { env: local.env, timeoutMs: 180_000 });
    expect(refused.code, `${refused.stdout}\n${refused.stderr}`).toBe(3);
    expect(refused.stdout).toMatch(/halt: halted by e2e@lab since \S+ \(Lease kube-system\/kube-runbook-halt\): e2e outage; no run starts/);
    expect(existsSync(localMark)).toBe(false);
    const resume = await cli(['resume', '--by', 'e2e@lab', ...cluster]);
    expect(resume.code, `${resume.stdout}\n${resume.stderr}`).toBe(0);
    const dry = await cli(['run', localRunbook, '-i', local.inventory, '--dry-run'], { env: local.env, timeoutMs: 180_000 });
    expect(dry.stdout).toContain('preflight ok   halt: no halt is set (Lease kube-system/kube-runbook-halt)');
    expect(dry.code, `${dry.stdout}\n${dry.stderr}`).toBe(0);
  });
});
