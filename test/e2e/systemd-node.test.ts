/**
 * `lab up --kubeadm --real-nodes 1 --systemd-nodes 1`: besides cp-1 and rnode-1, sd-1, a node whose PID 1 is systemd
 * (Debian's, booted on a root filesystem the lab's installer builds with mmdebstrap) made a node by `kubeadm join`:
 * kubeadm's kubelet.service and its 10-kubeadm.conf drop-in, containerd as a unit with the systemd cgroup driver,
 * sshd with a host key of its own, on the lab's bridge. The lab's own inventory reaches it over ssh, host key checked,
 * as a kubeadm cluster's machine: stop-kubelet's systemctl path, and the node dead-man's systemd path (a `systemd-run`
 * unit that fires after faultTtl once the executor is SIGKILLed; a boot unit that reverts after `lab reboot`). Every
 * outcome is read on the node (systemctl, the units' journal, the dead-man's own record, its containerd) or from the
 * apiserver (the node's Lease and Ready condition), not from the executor; `kube-runbook init` finds the node; `lab
 * status`, `lab containers` and `lab down` know it. Fails, never skips, on a machine that cannot run it. */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes, X509Certificate } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoordinationV1Api, KubeConfig, type CoreV1Api } from '@kubernetes/client-node';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { realClock } from '../../src/core/clock.js';
import { DEADMAN_MARGIN_MS } from '../../src/engine/deadman.js';
import { DEADMAN_ROOT } from '../../src/nodes/keepalive.js';
import { eventually } from '../../src/testing/wait.js';
import { cli, coreApi, inNetns, labCli, startLab, stopLab, type LabInfo } from './helpers/lab.js';
import { BIN } from './helpers/cli-lab.js';
import { deadmanFired, deadmanRecords, untilJournalApplied } from './helpers/kills.js';
import { writeRunbookYaml } from './helpers/runbook-file.js';
import { containerBack, containerRunning } from './helpers/static-pod-actions.js';
import { readLabInfo } from '../../packages/lab/src/host/info.js';
import { inSystemdNode } from '../../packages/lab/src/host/systemd-node.js';

const INSTANCE = 'sdn';
const NAME = 'sd-1';
const dir = mkdtempSync(join(tmpdir(), 'krsd-'));
let lab: LabInfo;
let core: CoreV1Api;
let leases: CoordinationV1Api;
let nodeAddress = '';
let pid = 0;
let inventoryFile = '';
const children: ChildProcess[] = [];

/** A command on the node, as root: exit code and output. */
async function onNode(argv: string[]): Promise<{ code: number; out: string }> {
  const r = await inSystemdNode(pid, argv);
  return { code: r.code, out: `${r.stdout}${r.stderr}` };
}
const isActive = async (unit: string) => (await onNode(['systemctl', 'is-active', unit])).out.trim();
const healthz = async () => (await onNode(['curl', '-s', '--max-time', '2', 'http://127.0.0.1:10248/healthz'])).out.trim();
const journal = async (unit: string, since: number) =>
  (await onNode(['journalctl', '--no-pager', '-o', 'cat', '-u', unit, '--since', `@${Math.floor(since / 1000)}`])).out;

function runbook(name: string, faultTtl: string, wait: string): string {
  const file = join(dir, `${name}.json`);
  writeFileSync(
    file,
    JSON.stringify({
      apiVersion: 'kube-runbook/v1',
      kind: 'Runbook',
      metadata: { name },
      spec: {
        safety: { allowContexts: ['lab'], faultTtl, maxUnavailable: { worker: '100%' } },
        steps: [{ action: 'stop-kubelet', with: { nodes: { names: [NAME] }, timeout: '60s' } }, { wait }],
      },
    }),
  );
  return file;
}

/** The executor in a process of its own (test/fixtures/engine-child.mjs); resolves once stop-kubelet is applied. */
async function startRun(file: string, runId: string): Promise<{ child: ChildProcess; ended: Promise<string> }> {
  const child = spawn(process.execPath, ['test/fixtures/engine-child.mjs', file, join(dir, 'runs'), runId, inventoryFile], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const ended = new Promise<string>((resolve) => child.once('exit', () => resolve(out)));
  const applied = await eventually(() => out.includes('applied\n') || child.exitCode !== null, 120_000, 100);
  if (!applied || !out.includes('applied\n')) throw new Error(`the run did not apply stop-kubelet:\n${out}`);
  return { child, ended };
}

async function kill(child: ChildProcess): Promise<void> {
  const gone = new Promise((r) => child.once('exit', r));
  child.kill('SIGKILL');
  await gone;
}

/** A file of the fired dead-man's record on the node (`<root>/<run>/<fault>.fired/`), once its revert has ended. */
async function record(runId: string, file: string): Promise<string> {
  const d = `${DEADMAN_ROOT}/${runId}`;
  await eventually(async () => (await onNode(['sh', '-c', `cat ${d}/*.fired/exit`])).code === 0, 60_000, 250);
  return (await onNode(['sh', '-c', `cat ${d}/*.fired/${file}`])).out.trim();
}

/** Whether the run's dead-man units are gone from /etc/systemd/system (removed by its unhook, after the record's exit). */
const unitFilesGone = (runId: string) =>
  eventually(async () => (await onNode(['sh', '-c', `ls /etc/systemd/system | grep -c ${runId} || true`])).out.trim() === '0', 10_000, 250);

/** The kubelet unit active and /healthz ok within `ms`. */
const kubeletBack = (ms: number) => eventually(async () => (await isActive('kubelet')) === 'active' && (await healthz()) === 'ok', ms, 250);

/** When the node's kubelet last renewed its Lease, by the apiserver (ms). */
async function renewedAt(): Promise<number> {
  const l = await leases.readNamespacedLease({ name: NAME, namespace: 'kube-node-lease' });
  return new Date(l.spec?.renewTime ?? 0).getTime();
}

/** Whether the Node's Ready condition is True, by the apiserver. */
async function ready(): Promise<boolean> {
  const n = await core.readNode({ name: NAME }).catch(() => undefined);
  return n?.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True';
}

/** The Lease renewed after `t` and the Node Ready within `ms`. */
const backInCluster = (t: number, ms: number) => eventually(async () => (await renewedAt()) > t && (await ready()), ms, 500);

/** The containers containerd runs on the node (`ctr tasks ls`): container id → PID. */
async function tasks(): Promise<Record<string, string>> {
  const out = (await onNode(['ctr', '--namespace', 'k8s.io', 'tasks', 'ls'])).out;
  const running = out
    .split('\n')
    .slice(1)
    .map((l) => l.trim().split(/\s+/))
    .filter((f) => f[2] === 'RUNNING');
  return Object.fromEntries(running.map((f) => [f[0]!, f[1]!]));
}

beforeAll(async () => {
  const t0 = realClock.now();
  lab = await startLab({ instance: INSTANCE, nodes: 0, realNodes: 1, kubeadm: true, systemdNodes: 1 });
  core = coreApi(lab);
  const kc = new KubeConfig();
  kc.loadFromFile(lab.kubeconfig);
  leases = kc.makeApiClient(CoordinationV1Api);
  const sd = lab.nodes.find((n) => n.name === NAME);
  pid = sd?.systemd?.pid ?? 0;
  nodeAddress = sd?.ip ?? '';
  // the lab's own inventory (sd-1 reached over ssh with the lab's key, its host key checked), as JSON for the child
  inventoryFile = join(dir, 'inventory.json');
  writeFileSync(inventoryFile, JSON.stringify(parse(readFileSync(lab.inventoryFile, 'utf8'))));
  expect(pid, 'lab up recorded the PID 1 of sd-1').toBeGreaterThan(1);
  console.log(`lab up --kubeadm --real-nodes 1 --systemd-nodes 1: ${((realClock.now() - t0) / 1000).toFixed(1)} s to every node Ready`);
}, 1_800_000);

afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await stopLab(INSTANCE);
  rmSync(dir, { recursive: true, force: true });
}, 300_000);

describe('a node whose PID 1 is systemd', () => {
  it("is systemd as PID 1, joined by kubeadm join: kubeadm's kubelet unit and drop-in, TLS-bootstrapped, Ready", async () => {
    expect((await onNode(['cat', '/proc/1/comm'])).out.trim()).toBe('systemd');
    expect((await onNode(['systemctl', 'is-system-running'])).out.trim()).toBe('running');
    expect(await isActive('containerd')).toBe('active');
    expect(await isActive('kubelet')).toBe('active');
    // the unit runs the kubelet as kubeadm's drop-in says, with the flags and configuration kubeadm join wrote
    expect((await onNode(['systemctl', 'show', 'kubelet', '-p', 'DropInPaths', '--value'])).out.trim()).toBe(
      '/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf',
    );
    const cmdline = (await onNode(['sh', '-c', 'tr "\\000" " " < /proc/$(systemctl show kubelet -p MainPID --value)/cmdline'])).out;
    expect(cmdline).toContain('--config=/var/lib/kubelet/config.yaml');
    expect(cmdline).toContain(`--node-ip=${nodeAddress}`);
    expect((await onNode(['grep', '-c', 'cgroupDriver: systemd', '/var/lib/kubelet/config.yaml'])).out.trim()).toBe('1');
    // its client certificate came from the TLS bootstrap: kubelet.conf points at the rotated certificate
    expect((await onNode(['cat', '/etc/kubernetes/kubelet.conf'])).out).toMatch(
      /client-certificate: \/var\/lib\/kubelet\/pki\/kubelet-client-current\.pem/,
    );
    expect(await ready()).toBe(true);
    const n = await core.readNode({ name: NAME });
    // the certificate the kubelet got by its bootstrap CSR: the node's identity, signed by the cluster's CA
    const pem = (await onNode(['cat', '/var/lib/kubelet/pki/kubelet-client-current.pem'])).out;
    const cert = new X509Certificate(/-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----/.exec(pem)![0]);
    expect(cert.subject).toContain(`CN=system:node:${NAME}`);
    expect(cert.checkIssued(new X509Certificate(readFileSync(join(lab.stateDir, 'pki', 'ca.crt'))))).toBe(true);
    expect(n.status?.addresses).toContainEqual({ type: 'InternalIP', address: nodeAddress });
  });

  it("stop-kubelet stops kubeadm's kubelet unit: the Lease stops, no container is killed; the revert brings the node back", async () => {
    await core.createNamespacedPod({
      namespace: 'default',
      body: {
        metadata: { name: 'on-sd-1' },
        spec: {
          nodeName: NAME,
          terminationGracePeriodSeconds: 1,
          containers: [
            { name: 'sleep', image: 'localhost/kube-runbook/busybox:lab', imagePullPolicy: 'Never', command: ['sleep', '86400'] },
          ],
        },
      },
    });
    const running = () =>
      core.readNamespacedPod({ name: 'on-sd-1', namespace: 'default' }).then(
        (p) => p.status?.phase === 'Running',
        () => false,
      );
    expect(await eventually(running, 60_000, 500), 'a pod runs on the node').toBe(true);
    const before = await tasks();
    expect(Object.keys(before).length, 'its sandbox and container').toBeGreaterThanOrEqual(2);
    const since = realClock.now();
    const run = await startRun(runbook('sd-stop', '2m', '6s'), `sd-stop-${randomBytes(3).toString('hex')}`);
    const applied = realClock.now();
    expect(await isActive('kubelet')).toBe('inactive');
    expect(await healthz()).not.toBe('ok');
    await realClock.sleep(4000);
    // two of the lab's renew intervals (2 s) later, by the apiserver: not renewed since the stop
    expect(await renewedAt()).toBeLessThanOrEqual(applied);
    const out = await run.ended;
    const ended = realClock.now();
    expect(out).toContain('ended passed');
    expect(await isActive('kubelet')).toBe('active');
    expect(await healthz()).toBe('ok');
    expect(await backInCluster(ended, 30_000), 'the Lease renewed and the node Ready after the revert').toBe(true);
    // counted by the node's containerd: the same containers, the same processes
    expect(await tasks()).toEqual(before);
    const said = await journal('kubelet', since);
    expect(said).toMatch(/Stopped kubelet/);
    expect(said).toMatch(/Started kubelet/);
  });

  it(`stop-apiserver (kubeadm's manifest on cp-1) and stop-kubelet (kubeadm's unit on sd-1), the executor SIGKILLed: each node's dead-man puts its fault back within faultTtl + ${DEADMAN_MARGIN_MS / 1000} s`, async () => {
    const TTL_S = 10;
    const manifest = join(lab.stateDir, 'nodes', 'cp-1', 'kubernetes', 'manifests', 'kube-apiserver.yaml');
    const manifestBefore = readFileSync(manifest);
    const cp1 = lab.nodes.find((n) => n.name === 'cp-1')!.netns;
    const onCp1 = async (script: string) => (await inNetns(cp1, script)).stdout;
    const onSd1 = async (script: string) => (await onNode(['sh', '-c', script])).out;
    const apiserverRuns = async () => (await onCp1(`${containerRunning(lab)}kr_running kube-apiserver && echo yes`)).trim() === 'yes';
    const state = join(dir, 'state-kill');
    const file = writeRunbookYaml(
      dir,
      'sd-deadman',
      lab.context,
      `faultTtl: ${TTL_S}s, maxUnavailable: {controlPlane: 1, worker: 1}`,
      `    - {name: stop sd-1's kubelet, action: stop-kubelet, with: {nodes: {names: [${NAME}]}}}
    - {name: stop the apiserver, action: stop-apiserver}
    - {name: hold, wait: 5m}
`,
    );
    const startedAt = realClock.now();
    const child = spawn(process.execPath, [BIN, 'run', file, '-i', lab.inventoryFile, '--yes', '-o', 'text', '--state-dir', state], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(child);
    let out = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    child.stderr.on('data', (b: Buffer) => (out += b.toString()));
    const ended = () => child.exitCode !== null || child.signalCode !== null;
    let killedAt: number;
    let run: Awaited<ReturnType<typeof untilJournalApplied>>;
    let watcher = '';
    try {
      // the apply confirmed by the journal, and each node shows its fault in place
      run = await untilJournalApplied({ out: () => out, ended }, [
        { action: 'stop-kubelet', node: NAME },
        { action: 'stop-apiserver', node: 'cp-1' },
      ]);
      expect(existsSync(manifest), "kubeadm's manifest, once the journal records the stop applied").toBe(false);
      expect(await apiserverRuns(), "the apiserver's container on cp-1").toBe(false);
      expect(await isActive('kubelet'), "sd-1's kubelet unit").toBe('inactive');
      const units = (await onNode(['systemctl', 'list-units', '--plain', '--no-legend', `kube-runbook-deadman-${run.runId}-*`])).out;
      expect(units, "sd-1's watcher is a unit of its own").toMatch(
        new RegExp(`kube-runbook-deadman-${run.runId}-\\S+\\.service\\s+loaded active running`),
      );
      watcher = /(kube-runbook-deadman-\S+\.service)/.exec(units)![1]!;
    } finally {
      if (!ended()) child.kill('SIGKILL');
      killedAt = realClock.now();
    }
    // from the nodes: each fault gone, read every 250 ms until both are, or the bound
    const at: { manifest?: number; kubelet?: number } = {};
    const bound = killedAt + TTL_S * 1000 + DEADMAN_MARGIN_MS + 60_000;
    while ((at.manifest === undefined || at.kubelet === undefined) && realClock.now() < bound) {
      if (existsSync(manifest)) at.manifest ??= realClock.now();
      if (at.kubelet === undefined && (await isActive('kubelet')) === 'active' && (await healthz()) === 'ok') at.kubelet = realClock.now();
      await realClock.sleep(250);
    }
    const ttlMs = TTL_S * 1000;
    const fault = (action: string) => run.applied.find((f) => f.action === action)!;
    const cp = await deadmanFired(onCp1, run.runId, fault('stop-apiserver').faultId, { ttlMs, killedAt, timeoutMs: 180_000 });
    const sd = await deadmanFired(onSd1, run.runId, fault('stop-kubelet').faultId, { ttlMs, killedAt });
    expect(sd.revertLog, "sd-1's dead-man's own record").toContain('started kubelet');
    expect(readFileSync(manifest).equals(manifestBefore), "kubeadm's kube-apiserver.yaml byte-identical to before").toBe(true);
    await containerBack(core, 'kube-apiserver');
    const answersAt = realClock.now();
    // the watcher's unit ran the revert and is gone (systemd-run --collect)
    expect(await journal(watcher, startedAt - 1000)).toMatch(new RegExp(`Started ${watcher.replace(/\./g, '\\.')}`));
    expect(await eventually(async () => (await isActive(watcher)) === 'inactive', 10_000, 250)).toBe(true);
    expect(await backInCluster(at.kubelet ?? killedAt, 60_000), "sd-1's Lease renewed and the node Ready").toBe(true);
    const since = (t: number | undefined) => (t === undefined ? 'never' : `${((t - killedAt) / 1000).toFixed(1)} s`);
    console.log(
      `SIGKILL (faultTtl ${TTL_S} s), from the kill: stop-apiserver@cp-1 fired ${cp.firedAt! - cp.keepalive} s after its last keepalive, ` +
        `manifest back ${since(at.manifest)}, apiserver answering ${since(answersAt)}; stop-kubelet@sd-1 (systemd-run unit) fired ` +
        `${sd.firedAt! - sd.keepalive} s after its last keepalive, kubelet unit active ${since(at.kubelet)}, Ready ${since(realClock.now())}`,
    );
    expect(at.manifest! - killedAt, "kubeadm's manifest back after the kill").toBeLessThanOrEqual(ttlMs + DEADMAN_MARGIN_MS);
    expect(at.kubelet! - killedAt, "sd-1's kubelet unit active after the kill").toBeLessThanOrEqual(ttlMs + DEADMAN_MARGIN_MS);
    // recover finds nothing left but the dead-men's records, removes them and releases the run lock
    const rec = await cli(['recover', run.runId, '--force', '--state-dir', state], { timeoutMs: 300_000 });
    expect(rec.code, `${rec.stdout}\n${rec.stderr}`).toBe(0);
    expect(await deadmanRecords(onCp1, run.runId), 'dead-man records on cp-1').toEqual([]);
    expect(await deadmanRecords(onSd1, run.runId), 'dead-man records on sd-1').toEqual([]);
    // the boot unit it had enabled on sd-1 is gone with it
    expect(await unitFilesGone(run.runId)).toBe(true);
  });

  it("is found by kube-runbook init: a kubeadm cluster, the node a worker at its address, reached over ssh with the lab's key", async () => {
    const d = join(dir, 'init');
    const r = await cli(['init', '--kubeconfig', lab.kubeconfig, '--yes', '--dir', d]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('layout kubeadm');
    const inv = parse(readFileSync(join(d, 'inventory.yaml'), 'utf8')) as {
      spec: { layout: string; nodes: { name: string; address?: string; roles: string[]; mountns?: string }[] };
    };
    expect(inv.spec.layout).toBe('kubeadm');
    expect(inv.spec.nodes).toContainEqual({
      name: NAME,
      address: nodeAddress,
      roles: ['worker'],
      zone: 'zone-a',
      transport: {
        type: 'ssh',
        user: 'root',
        identityFile: join(lab.stateDir, 'ssh', 'id_ed25519'),
        knownHostsFile: join(lab.stateDir, 'ssh', 'known_hosts'),
        ignoreUserConfig: true,
      },
      kubelet: 'systemd',
    });
    // the lab's own nodes keep their mount namespaces: cp-1's /etc/kubernetes is its own, not this machine's
    expect(inv.spec.nodes.find((n) => n.name === 'cp-1')?.mountns).toMatch(/\/mnt\/cp-1$/);
    const plan = await cli(['plan', join(d, 'runbook.yaml'), '-i', join(d, 'inventory.yaml')]);
    expect(plan.code, `${plan.stdout}\n${plan.stderr}`).toBe(0);
  });

  it("the dead-man's boot unit starts the kubelet after lab reboot (a power cut), the kubelet's own unit disabled", async () => {
    const runId = `sd-boot-${randomBytes(3).toString('hex')}`;
    const run = await startRun(runbook('sd-boot', '5m', '10m'), runId);
    await kill(run.child);
    const boot = (await onNode(['sh', '-c', `ls /etc/systemd/system | grep "^kube-runbook-deadman-${runId}-.*-boot.service$"`])).out.trim();
    expect(boot).toMatch(/-boot\.service$/);
    expect((await onNode(['systemctl', 'is-enabled', boot])).out.trim()).toBe('enabled');
    // only the boot unit may bring it back: the kubelet is not started at boot by its own unit
    expect((await onNode(['systemctl', 'disable', 'kubelet'])).code).toBe(0);
    try {
      const bootAt = realClock.now();
      const r = await labCli(['reboot', NAME, '--instance', INSTANCE, '--json']);
      expect(r.code, r.stderr).toBe(0);
      const before = pid;
      pid = (await readLabInfo(INSTANCE)).nodes.find((n) => n.name === NAME)?.systemd?.pid ?? 0;
      expect(pid, 'a new PID 1, recorded by lab reboot').not.toBe(before);
      expect((JSON.parse(r.stdout) as { killed: number }).killed, 'the processes the power cut killed').toBeGreaterThanOrEqual(7);
      expect(await kubeletBack(60_000)).toBe(true);
      const took = realClock.now() - bootAt;
      // systemd ran the boot unit in this boot; its watcher fired at once (fired-at after the boot) and started the kubelet
      expect(await journal(boot, bootAt - 1000)).toMatch(/Started .*kube-runbook: after a reboot, the dead-man of/);
      const fired = { exit: await record(runId, 'exit'), log: await record(runId, 'revert.log') };
      expect(fired).toEqual({ exit: '0', log: expect.stringContaining('started kubelet') });
      expect(Number(await record(runId, 'fired-at')) * 1000).toBeGreaterThanOrEqual(bootAt - 1000);
      expect(await unitFilesGone(runId)).toBe(true);
      expect(await backInCluster(bootAt, 60_000), 'the Lease renewed and the node Ready after the reboot').toBe(true);
      console.log(`dead-man's boot unit: kubelet healthy ${(took / 1000).toFixed(1)} s after the reboot began`);
    } finally {
      if (pid) await onNode(['systemctl', 'enable', 'kubelet']);
    }
  });

  it('lab status shows its systemd and kubelet, lab containers its containerd; lab down leaves nothing of it', async () => {
    const status = await labCli(['status', '--instance', INSTANCE, '--json']);
    expect(status.code, status.stderr).toBe(0);
    const st = JSON.parse(status.stdout) as { components: { node: string; service: string; running: boolean; healthy: boolean }[] };
    expect(st.components.filter((c) => c.node === NAME)).toEqual([
      { node: NAME, service: 'systemd', running: true, healthy: true },
      { node: NAME, service: 'kubelet', running: true, healthy: true },
    ]);
    const containers = await labCli(['containers', NAME, '--instance', INSTANCE, '--json']);
    expect(containers.code, containers.stderr).toBe(0);
    const [c] = JSON.parse(containers.stdout) as { node: string; containers: { pod: string; running: boolean }[]; error?: string }[];
    expect(c?.error).toBeUndefined();
    expect(c?.containers.filter((x) => x.running).map((x) => x.pod)).toContain('on-sd-1');
    const cgroups = () =>
      readdirSync('/sys/fs/cgroup').filter((h) => existsSync(join('/sys/fs/cgroup', h, `kube-runbook-${INSTANCE}-${NAME}`)));
    expect(cgroups().length, 'its cgroup in every hierarchy').toBeGreaterThan(0);
    await stopLab(INSTANCE);
    expect(await eventually(() => !existsSync(`/proc/${pid}`), 10_000, 100), 'its PID 1 gone').toBe(true);
    expect(cgroups()).toEqual([]);
    pid = 0;
  });
});
