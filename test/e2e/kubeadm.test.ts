import { existsSync, mkdtempSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { CertificatesV1Api, CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { realClock } from '../../src/core/clock.js';
import { silentLogger } from '../../src/core/logger.js';
import { createKubeAccess } from '../../src/kube/client.js';
import { discoverCluster } from '../../src/cli/init-discover.js';
import { runAndMeasure, type Outcome } from '../../packages/lab/src/cli/demo.js';
import { bootstrapToken } from '../../packages/lab/src/lifecycle/kubeadm-config.js';
import { kubeadmNodesLeft, madeMountPoints } from '../../packages/lab/src/host/mount-ns.js';
import { containerBack, runControlPlaneAction } from './helpers/static-pod-actions.js';
import { expectNodesReady, expectUpRefused } from './helpers/lab-expect.js';
import { expectObjectivesMet } from './helpers/objectives.js';
import { cli, instanceFor, leftovers, REPO, startLab, stopLab, type LabInfo } from './helpers/lab.js';

/**
 * `lab up --kubeadm --real-nodes 2`: the release's kubeadm makes the control plane on cp-1 (`kubeadm init`: its
 * certificates, kubeconfigs, static-pod manifests, kubeadm-config) and joins rnode-1 and rnode-2 (`kubeadm join`, the
 * kubelet's TLS bootstrap); every kubeadm-layout action then runs against kubeadm's own files, one small runbook
 * each through the CLI: after the apply the component's container is gone (or runs with the changed flags), after the
 * revert it runs again and the cluster answers; and the emergency runbook freeze-evictions, guarded, with nothing evicted (the controller-manager's log) and nothing killed (the
 * workers' containerd). The incident runbooks run on a kubeadm lab of their own (test/e2e/incidents.test.ts on 1.37
 * and 1.34); the executor SIGKILLed over kubeadm's manifest and kubeadm's kubelet unit in
 * test/e2e/systemd-node.test.ts. Fails, never skips, on a machine that cannot run real nodes.
 */
const INSTANCE = instanceFor('kb');
const COMPONENTS = ['etcd', 'kube-apiserver', 'kube-controller-manager', 'kube-scheduler'] as const;

let lab: LabInfo;
let kc: KubeConfig;
let core: CoreV1Api;
let work: string;
/** /etc/kubernetes was this machine's own before the test (not a mount point a kubeadm lab made). */
let etcKubernetesOwn: boolean;

beforeAll(async () => {
  etcKubernetesOwn = existsSync('/etc/kubernetes') && !(await madeMountPoints()).includes('/etc/kubernetes');
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

  it("leaves nothing behind after lab down: no process, mount, namespace, nor kubeadm's mount points", async () => {
    await stopLab(INSTANCE);
    expect(await leftovers(INSTANCE)).toEqual([]);
    // a directory of this machine's own stays; the mount point kubeadm labs made goes with the last of them, and
    // is kept, recorded for removal, while labs of other lanes are up
    const exists = existsSync('/etc/kubernetes');
    if (etcKubernetesOwn) expect(exists, "this machine's own /etc/kubernetes").toBe(true);
    else if (await kubeadmNodesLeft())
      expect(!exists || (await madeMountPoints()).includes('/etc/kubernetes'), 'kept for the kubeadm labs still up, recorded').toBe(true);
    else expect(exists, 'the mount point, once no kubeadm lab is left').toBe(false);
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
