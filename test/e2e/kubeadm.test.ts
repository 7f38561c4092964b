import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { CertificatesV1Api, CoordinationV1Api, CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { realClock } from '../../src/core/clock.js';
import { silentLogger } from '../../src/core/logger.js';
import { shq } from '../../src/core/shell.js';
import { DEADMAN_MARGIN_MS } from '../../src/engine/deadman.js';
import { createKubeAccess } from '../../src/kube/client.js';
import { discoverCluster } from '../../src/cli/init-discover.js';
import { runAndMeasure, type Outcome } from '../../packages/lab/src/cli/demo.js';
import { bootstrapToken } from '../../packages/lab/src/lifecycle/kubeadm-config.js';
import { BIN } from './helpers/cli-lab.js';
import { deadmanFired, deadmanRecords, untilJournalApplied } from './helpers/kills.js';
import { containerBack, containerRunning, runControlPlaneAction } from './helpers/static-pod-actions.js';
import { expectNodesReady, expectUpRefused } from './helpers/lab-expect.js';
import { expectObjectivesMet } from './helpers/objectives.js';
import { cli, inNetns, instanceFor, leftovers, REPO, startLab, stopLab, until, type LabInfo } from './helpers/lab.js';
import { writeRunbookYaml } from './helpers/runbook-file.js';

/**
 * `lab up --kubeadm --real-nodes 2`: the release's kubeadm makes the control plane on cp-1 (`kubeadm init`: its
 * certificates, kubeconfigs, static-pod manifests, kubeadm-config) and joins rnode-1 and rnode-2 (`kubeadm join`, the
 * kubelet's TLS bootstrap); every kubeadm-layout action then runs against kubeadm's own files, one small runbook
 * each through the CLI: after the apply the component's container is gone (or runs with the changed flags), after the
 * revert it runs again and the cluster answers; the executor SIGKILLed over kubeadm's files; and the emergency
 * runbook freeze-evictions, guarded, with nothing evicted (the controller-manager's log) and nothing killed (the
 * workers' containerd). The incident runbooks run on a kubeadm lab of their own (test/e2e/incidents.test.ts on 1.37
 * and 1.34). Fails, never skips, on a machine that cannot run real nodes.
 */
const INSTANCE = instanceFor('kb');
const COMPONENTS = ['etcd', 'kube-apiserver', 'kube-controller-manager', 'kube-scheduler'] as const;
/** faultTtl of the SIGKILL case: the dead-men fire this long after the last keepalive. */
const TTL_S = 10;

let lab: LabInfo;
let kc: KubeConfig;
let core: CoreV1Api;
let work: string;
let etcKubernetesBefore: boolean;

beforeAll(async () => {
  etcKubernetesBefore = existsSync('/etc/kubernetes');
  const t0 = realClock.now();
  lab = await startLab({ instance: INSTANCE, nodes: 0, realNodes: 2, kubeadm: true });
  process.stderr.write(`[lab] up with kubeadm init and 2 kubeadm joins took ${realClock.now() - t0} ms\n`);
  kc = new KubeConfig();
  kc.loadFromFile(lab.kubeconfig);
  core = kc.makeApiClient(CoreV1Api);
  work = mkdtempSync(join(tmpdir(), 'kr-kubeadm-'));
});

afterAll(async () => {
  await stopLab(INSTANCE);
  if (work) rmSync(work, { recursive: true, force: true });
});

/** Nothing evicted (the controller-manager's log), no container killed (each worker's containerd), all reverted. */
function expectUntouched(o: Outcome) {
  expect(o.killedFrom).toBe('containerd of rnode-1, rnode-2 (container ids and start times before and after)');
  expect(o.realContainersAtStart, 'sample containers running on the workers at the start').toBeGreaterThan(0);
  expect(o.evicted, "pods evicted, by the controller-manager's log").toEqual([]);
  expect(o.killed, 'containers killed or restarted').toEqual([]);
  expect(o.report.remaining, 'faults left applied').toEqual([]);
  expect(o.report.faults.every((f) => f.status === 'reverted')).toBe(true);
  expect(o.report.rollback?.complete).toBe(true);
}

/**
 * cp-1's /etc/kubernetes as this machine sees it: the directory bound there in cp-1's mount namespace. The inventory
 * names kubeadm's own path, which the netns transport reaches by entering that namespace.
 */
const kubeadmDir = () => {
  const inv = parse(readFileSync(lab.inventoryFile, 'utf8')) as {
    spec: { kubeadm: { dir?: string }; nodes: { name: string; mountns?: string }[] };
  };
  expect(inv.spec.kubeadm.dir ?? '/etc/kubernetes').toBe('/etc/kubernetes');
  expect(inv.spec.nodes.find((n) => n.name === 'cp-1')?.mountns).toMatch(/\/mnt\/cp-1$/);
  return join(lab.stateDir, 'nodes', 'cp-1', 'kubernetes');
};

describe('lab up --kubeadm --real-nodes 2', () => {
  it('makes three real nodes Ready, cp-1 by kubeadm init and the workers by kubeadm join with a TLS-bootstrapped kubelet', async () => {
    const nodes = await expectNodesReady(kc, ['cp-1', 'rnode-1', 'rnode-2']);
    const cp = nodes.find((n) => n.metadata?.name === 'cp-1')!;
    expect(cp.metadata?.labels).toHaveProperty('node-role.kubernetes.io/control-plane', '');
    expect(cp.spec?.taints).toContainEqual({ key: 'node-role.kubernetes.io/control-plane', effect: 'NoSchedule' });
    // each worker's kubelet asked for its client certificate with the bootstrap token, and kubeadm's RBAC approved it
    const tokenId = bootstrapToken(INSTANCE).split('.')[0]!;
    const csrs = (await kc.makeApiClient(CertificatesV1Api).listCertificateSigningRequest()).items;
    for (const w of ['rnode-1', 'rnode-2']) {
      const csr = csrs.find((c) => c.spec.username === `system:bootstrap:${tokenId}` && c.status?.certificate && c.spec.request);
      expect(csr, `a bootstrap CSR of ${w}`).toBeDefined();
      const kubeletConf = readFileSync(join(lab.stateDir, 'nodes', w, 'kubernetes', 'kubelet.conf'), 'utf8');
      expect(kubeletConf).toContain('/var/lib/kubelet/pki/kubelet-client-current.pem');
      // the rotated certificate's link names it in the node's /var/lib/kubelet, the node's kubelet-root here
      const pki = join(lab.stateDir, 'nodes', w, 'kubelet-root', 'pki');
      const current = readlinkSync(join(pki, 'kubelet-client-current.pem'));
      expect(current).toMatch(/^\/var\/lib\/kubelet\/pki\/kubelet-client-[0-9-]+\.pem$/);
      expect(readFileSync(join(pki, basename(current)), 'utf8')).toContain('BEGIN CERTIFICATE');
      expect(readFileSync(join(lab.stateDir, 'nodes', w, 'kubelet-root', 'kubeadm-flags.env'), 'utf8')).toContain(
        `--hostname-override=${w}`,
      );
    }
    const demo = (await core.listNamespacedPod({ namespace: 'demo' })).items;
    expect(demo.length).toBeGreaterThan(0);
    expect(demo.every((p) => p.spec?.nodeName !== 'cp-1' && p.status?.phase === 'Running')).toBe(true);
  });

  it("runs kubeadm's own static pods and uploads kubeadm-config with the lab's settings as extraArgs", async () => {
    const cm = await core.readNamespacedConfigMap({ name: 'kubeadm-config', namespace: 'kube-system' });
    const cluster = parse(cm.data?.ClusterConfiguration ?? '') as {
      kubernetesVersion: string;
      controllerManager: { extraArgs: { name: string; value: string }[] };
    };
    expect(cluster.kubernetesVersion).toBe(`v${lab.binaries?.version}`);
    expect(cluster.controllerManager.extraArgs).toContainEqual({ name: 'node-monitor-grace-period', value: '8s' });
    const manifests = join(kubeadmDir(), 'manifests');
    for (const c of COMPONENTS) {
      const manifest = parse(readFileSync(join(manifests, `${c}.yaml`), 'utf8')) as {
        metadata: { annotations?: Record<string, string> };
        spec: { containers: { image: string; command: string[] }[] };
      };
      expect(manifest.spec.containers[0]!.image).toMatch(new RegExp(`^registry\\.k8s\\.io/${c}:`));
      expect(manifest.spec.containers[0]!.command[0]).toBe(c);
      const pod = await core.readNamespacedPod({ name: `${c}-cp-1`, namespace: 'kube-system' });
      expect(pod.status?.phase).toBe('Running');
      expect(pod.metadata?.annotations?.['kubernetes.io/config.source']).toBe('file');
    }
    const annotations = (c: string) =>
      (parse(readFileSync(join(manifests, `${c}.yaml`), 'utf8')) as { metadata: { annotations: Record<string, string> } }).metadata
        .annotations;
    expect(annotations('kube-apiserver')).toHaveProperty('kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint');
    expect(annotations('etcd')).toHaveProperty('kubeadm.kubernetes.io/etcd.advertise-client-urls');
    const kcm = parse(readFileSync(join(manifests, 'kube-controller-manager.yaml'), 'utf8')) as {
      spec: { containers: { command: string[] }[] };
    };
    expect(kcm.spec.containers[0]!.command).toContain('--node-monitor-grace-period=8s');
  });

  it('is found by kube-runbook init as a kubeadm cluster, with its nodes and settings, from what kubeadm wrote', async () => {
    const d = await discoverCluster(
      createKubeAccess({ kubeconfig: lab.kubeconfig, context: lab.context, clock: realClock, log: silentLogger }),
    );
    expect(d.layout).toBe('kubeadm');
    expect(d.layoutFrom).toBe('kube-system/kubeadm-config');
    expect(d.nodes?.map((n) => [n.name, n.roles])).toEqual([
      ['cp-1', ['control-plane', 'etcd']],
      ['rnode-1', ['worker']],
      ['rnode-2', ['worker']],
    ]);
    expect(d.controller).toMatchObject({ nodeMonitorGracePeriod: '8s', nodeMonitorPeriod: '1s', nodeEvictionRate: 0.1 });
    const dir = join(work, 'init');
    const r = await cli(['init', '--kubeconfig', lab.kubeconfig, '--yes', '--dir', dir]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('layout kubeadm');
    const plan = await cli(['plan', join(dir, 'runbook.yaml'), '-i', join(dir, 'inventory.yaml')]);
    expect(plan.code, `${plan.stdout}\n${plan.stderr}`).toBe(0);
  });

  // the controller-manager first: the apiserver and etcd outages make it and the scheduler crash (they lose their
  // leader Lease), and the kubelet's crash-loop back-off, kept per pod UID, outlives a manifest parked and put back
  it("disable-taint-eviction: the kubelet restarts the controller-manager with kubeadm's manifest edited, and back", async () => {
    const off = `kr_running kube-controller-manager && tr '\\000' '\\n' < /proc/$kr_pid/cmdline | grep -q -- '-taint-eviction-controller'`;
    await runControlPlaneAction(lab, work, 'disable-taint-eviction', { before: `! { ${off}; }`, after: off });
    await containerBack(core, 'kube-controller-manager');
    const kcm = await core.readNamespacedPod({ name: 'kube-controller-manager-cp-1', namespace: 'kube-system' });
    expect(kcm.spec?.containers[0]?.command?.join(' ')).not.toContain('-taint-eviction-controller');
  });

  // not stop-etcd: it parks and puts back its manifest as these do, and etcd takes about 2 minutes to come back here (docs/lab.md)
  for (const [action, container] of [
    ['stop-controller-manager', 'kube-controller-manager'],
    ['stop-scheduler', 'kube-scheduler'],
  ] as const)
    it(`${action}: parks kubeadm's manifest, the kubelet kills the ${container} container; the revert brings it back`, async () => {
      await runControlPlaneAction(lab, work, action, { before: `kr_running ${container}`, after: `! kr_running ${container}` });
      await containerBack(core, container);
    });

  // the emergency runbook, whose actions take kubeadm's own paths: the controller-manager's manifest and the workers'
  // kubelets; guarded, as on the lab, and counted
  // apart from the executor: evictions from the controller-manager's log, containers from each worker's containerd;
  // before the SIGKILL case, whose apiserver outage may leave the controller-manager in the kubelet's crash-loop back-off
  it("freeze-evictions: parks kubeadm's controller-manager manifest and stops the kubelets, restores them in order, nothing evicted or killed", async () => {
    const o = await runAndMeasure(lab, join(REPO, 'runbooks', 'emergency', 'freeze-evictions.yaml'), true, ['--context', lab.context]);
    expect(o.exitCode, `exit code of the run (report in ${o.reportDir})`).toBe(0);
    const at = (action: string, node: string) => o.report.faults.find((f) => f.action === action && f.node === node);
    const kcm = at('stop-controller-manager', 'cp-1');
    expect(kcm?.status).toBe('reverted');
    // the kubelets came back first, the controller-manager last
    for (const w of ['rnode-1', 'rnode-2']) {
      const kubelet = at('stop-kubelet', w);
      expect(kubelet?.status, `${w}'s kubelet`).toBe('reverted');
      expect(Date.parse(kubelet!.revertedAt!)).toBeLessThan(Date.parse(kcm!.revertedAt!));
    }
    await containerBack(core, 'kube-controller-manager');
    expectUntouched(o);
    expectObjectivesMet(o.report, 'kubeadm freeze-evictions', [
      'a controller-manager leads again',
      'every node Ready',
      'every Deployment available',
    ]);
  });

  it(`stop-apiserver and stop-kubelet of rnode-1, the executor SIGKILLed: each node's dead-man puts kubeadm's files and the kubelet back within faultTtl + ${DEADMAN_MARGIN_MS / 1000} s`, async () => {
    const manifest = join(kubeadmDir(), 'manifests', 'kube-apiserver.yaml');
    const manifestBefore = readFileSync(manifest);
    const running = containerRunning(lab);
    const netns = (node: string) => lab.nodes.find((n) => n.name === node)!.netns;
    const onNode = (node: string) => async (script: string) => (await inNetns(netns(node), script)).stdout;
    /** cp-1's view of the apiserver's fault: whether kubeadm's manifest is in manifests/, whether its container runs. */
    const apiserverSeen = async () => {
      const [m, c] = (
        await onNode('cp-1')(`${running}m=0; [ -e ${shq(manifest)} ] && m=1; c=0; kr_running kube-apiserver && c=1; echo $m $c`)
      )
        .trim()
        .split(' ');
      return { manifest: m === '1', container: c === '1' };
    };
    const kubeletRuns = async () =>
      (await inNetns(netns('rnode-1'), shq(join(lab.stateDir, 'nodes', 'rnode-1', 'kubelet', 'status')))).code === 0;
    const state = join(work, 'state-kill');
    const file = writeRunbookYaml(
      work,
      'kubeadm-deadman',
      lab.context,
      `faultTtl: ${TTL_S}s, maxUnavailable: {controlPlane: 1, worker: 1}`,
      `    - {name: stop rnode-1's kubelet, action: stop-kubelet, with: {nodes: {names: [rnode-1]}}}
    - {name: stop the apiserver, action: stop-apiserver}
    - {name: hold, wait: 5m}
`,
    );
    const child = spawn(process.execPath, [BIN, 'run', file, '-i', lab.inventoryFile, '--yes', '-o', 'text', '--state-dir', state], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    child.stderr.on('data', (b: Buffer) => (out += b.toString()));
    const ended = () => child.exitCode !== null || child.signalCode !== null;
    let killedAt: number;
    let run: Awaited<ReturnType<typeof untilJournalApplied>>;
    try {
      // the apply confirmed: the journal says so, and each node shows its fault in place
      run = await untilJournalApplied({ out: () => out, ended }, [
        { action: 'stop-kubelet', node: 'rnode-1' },
        { action: 'stop-apiserver', node: 'cp-1' },
      ]);
      expect(await apiserverSeen(), "kubeadm's manifest and the apiserver's container, once the journal records the stop applied").toEqual({
        manifest: false,
        container: false,
      });
      expect(await kubeletRuns(), "rnode-1's kubelet, once the journal records its stop applied").toBe(false);
    } finally {
      if (!ended()) child.kill('SIGKILL');
      killedAt = realClock.now();
    }
    // from the nodes: each fault gone, read every 250 ms until both are, or the bound
    const since = (at: number | undefined) => (at === undefined ? 'never' : `${((at - killedAt) / 1000).toFixed(1)} s`);
    const at: { manifest?: number; container?: number; kubelet?: number } = {};
    const bound = killedAt + TTL_S * 1000 + DEADMAN_MARGIN_MS + 60_000;
    while ((at.manifest === undefined || at.container === undefined || at.kubelet === undefined) && realClock.now() < bound) {
      const seen = await apiserverSeen();
      if (seen.manifest) at.manifest ??= realClock.now();
      if (seen.container) at.container ??= realClock.now();
      if (at.kubelet === undefined && (await kubeletRuns())) at.kubelet = realClock.now();
      await realClock.sleep(250);
    }
    // each node's own record: fired within faultTtl + margin of its last keepalive, none after the kill, revert exit 0
    const fault = (action: string) => run.applied.find((f) => f.action === action)!;
    const ttlMs = TTL_S * 1000;
    const cp = await deadmanFired(onNode('cp-1'), run.runId, fault('stop-apiserver').faultId, { ttlMs, killedAt, timeoutMs: 180_000 });
    const rn = await deadmanFired(onNode('rnode-1'), run.runId, fault('stop-kubelet').faultId, { ttlMs, killedAt });
    expect(readFileSync(manifest).equals(manifestBefore), "kubeadm's kube-apiserver.yaml byte-identical to before").toBe(true);
    await containerBack(core, 'kube-apiserver');
    const answersAt = realClock.now();
    await until(
      'rnode-1 Ready, its Lease renewed by the kubelet started again',
      async () => {
        const node = await core.readNode({ name: 'rnode-1' });
        const lease = await kc.makeApiClient(CoordinationV1Api).readNamespacedLease({ name: 'rnode-1', namespace: 'kube-node-lease' });
        const renewed = lease.spec?.renewTime ? new Date(lease.spec.renewTime).getTime() : 0;
        return node.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True' && renewed > at.kubelet!;
      },
      60_000,
      500,
    );
    const readyAt = realClock.now();
    console.log(
      `kubeadm SIGKILL (faultTtl ${TTL_S} s), from the kill: stop-apiserver@cp-1 fired ${cp.firedAt! - cp.keepalive} s after its last keepalive, ` +
        `manifest back ${since(at.manifest)}, container running ${since(at.container)}, apiserver answering ${since(answersAt)}; ` +
        `stop-kubelet@rnode-1 fired ${rn.firedAt! - rn.keepalive} s after its last keepalive, kubelet running ${since(at.kubelet)}, Ready ${since(readyAt)}`,
    );
    expect(at.manifest! - killedAt, "kubeadm's manifest back after the kill").toBeLessThanOrEqual(ttlMs + DEADMAN_MARGIN_MS);
    expect(at.kubelet! - killedAt, "rnode-1's kubelet running after the kill").toBeLessThanOrEqual(ttlMs + DEADMAN_MARGIN_MS);
    // recover finds nothing left but the dead-men's records, removes them and releases the run lock
    const rec = await cli(['recover', run.runId, '--force', '--state-dir', state], { timeoutMs: 300_000 });
    expect(rec.code, `${rec.stdout}\n${rec.stderr}`).toBe(0);
    for (const node of ['cp-1', 'rnode-1'])
      expect(await deadmanRecords(onNode(node), run.runId), `dead-man records on ${node}`).toEqual([]);
    expect(existsSync(join(kubeadmDir(), 'kube-runbook-parked', 'kube-apiserver.yaml')), 'a parked manifest').toBe(false);
  });

  it("leaves nothing behind after lab down: no process, mount, namespace, nor kubeadm's mount points", async () => {
    await stopLab(INSTANCE);
    expect(await leftovers(INSTANCE)).toEqual([]);
    expect(existsSync('/etc/kubernetes')).toBe(etcKubernetesBefore);
  });
});

describe('lab up --kubeadm with bad options', () => {
  it('refuses it without --real-nodes, with simulated nodes and on 1.20: exit 2, nothing made', async () => {
    await expectUpRefused('e2ekq', [
      [['--kubeadm'], '--kubeadm must be given with --real-nodes N'],
      [['--kubeadm', '--real-nodes', '1', '--nodes', '2'], '--kubeadm runs real nodes only'],
      [['--kubeadm', '--real-nodes', '1', '--kubernetes-version', '1.20'], '--kubeadm runs on Kubernetes 1.37 and 1.34'],
    ]);
  });
});
