import { existsSync, mkdtempSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { CertificatesV1Api, CoreV1Api, KubeConfig, VersionApi } from '@kubernetes/client-node';
import { parse, stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { realClock } from '../../src/core/clock.js';
import { silentLogger } from '../../src/core/logger.js';
import { createKubeAccess } from '../../src/kube/client.js';
import { discoverCluster } from '../../src/cli/init-discover.js';
import { instanceRunDir } from '../../packages/lab/src/host/paths.js';
import { bootstrapToken } from '../../packages/lab/src/lifecycle/kubeadm-config.js';
import { cli, instanceFor, labCli, leftovers, startLab, stopLab, until, type LabInfo } from './helpers/lab.js';

/**
 * `lab up --kubeadm --real-nodes 2`: the release's kubeadm makes the control plane on cp-1 (`kubeadm init`: its
 * certificates, kubeconfigs, static-pod manifests, kubeadm-config) and joins rnode-1 and rnode-2 (`kubeadm join`, the
 * kubelet's TLS bootstrap); every kubeadm-layout action then runs against kubeadm's own files, one small runbook
 * each through the CLI: after the apply the component's container is gone (or runs with the changed flags), after the
 * revert it runs again and the cluster answers. Fails, never skips, on a machine that cannot run real nodes.
 */
const INSTANCE = instanceFor('kb');
const COMPONENTS = ['etcd', 'kube-apiserver', 'kube-controller-manager', 'kube-scheduler'] as const;

let lab: LabInfo;
let kc: KubeConfig;
let core: CoreV1Api;
let work: string;
/** sh: exit 0 when the container named $1 runs in cp-1's containerd (its pid in $kr_pid), else 1. */
let running: string;
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
  const ctr = /'?([^'\s]*\/ctr)'? /.exec(readFileSync(join(lab.stateDir, 'nodes', 'cp-1', 'containerd', 'health'), 'utf8'))![1]!;
  const c = `'${ctr}' -a '${join(instanceRunDir(INSTANCE), 'cp-1', 'containerd.sock')}' -n k8s.io`;
  running =
    `kr_running() { for id in $(${c} containers ls -q "labels.\\"io.kubernetes.container.name\\"==$1" 2>/dev/null); do ` +
    `kr_pid=$(${c} tasks ls 2>/dev/null | awk -v id="$id" '$1 == id && $3 == "RUNNING" {print $2}'); [ -n "$kr_pid" ] && return 0; done; return 1; }\n`;
});

afterAll(async () => {
  await stopLab(INSTANCE);
  if (work) rmSync(work, { recursive: true, force: true });
});

const kubeadmDir = () => (parse(readFileSync(lab.inventoryFile, 'utf8')) as { spec: { kubeadm: { dir: string } } }).spec.kubeadm.dir;

/** Runs one action through the CLI: `before` holds first, the action, then `after` holds; all is reverted at the end. */
async function runAction(action: string, before: string, after: string, params: Record<string, unknown> = {}): Promise<void> {
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
      metadata: { name: `kubeadm-${action}`, description: `${action} on kubeadm's control plane` },
      spec: {
        safety: { allowContexts: ['lab-*'], maxDuration: '5m', faultTtl: '3m', maxUnavailable: { controlPlane: '100%' } },
        steps: [check('before', before), { name: action, action, with: { nodes: 'control-plane', ...params } }, check('after', after)],
      },
    }),
  );
  const r = await cli(['run', file, '-i', lab.inventoryFile, '--yes', '-o', 'text'], { timeoutMs: 300_000 });
  expect(r.code, `${r.stdout}\n${r.stderr}`).toBe(0);
  expect(r.stdout).toContain(`reverted ${action} on cp-1`);
}

/** The cluster answers and the kubelet reports `component`'s container running again. */
async function back(component: string): Promise<void> {
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

describe('lab up --kubeadm --real-nodes 2', () => {
  it('makes three real nodes Ready, cp-1 by kubeadm init and the workers by kubeadm join with a TLS-bootstrapped kubelet', async () => {
    const server = await kc.makeApiClient(VersionApi).getCode();
    const nodes = (await core.listNode()).items;
    expect(nodes.map((n) => n.metadata?.name).sort()).toEqual(['cp-1', 'rnode-1', 'rnode-2']);
    for (const n of nodes) {
      expect(n.status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('True');
      expect(n.status?.nodeInfo?.kubeletVersion).toBe(server.gitVersion);
    }
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
    await runAction('disable-taint-eviction', `! { ${off}; }`, off);
    await back('kube-controller-manager');
    const kcm = await core.readNamespacedPod({ name: 'kube-controller-manager-cp-1', namespace: 'kube-system' });
    expect(kcm.spec?.containers[0]?.command?.join(' ')).not.toContain('-taint-eviction-controller');
  });

  // stop-etcd stays on --static-pods (real-nodes.test.ts): here etcd takes about 2 minutes to come back (docs/lab.md)
  for (const [action, container] of [
    ['stop-controller-manager', 'kube-controller-manager'],
    ['stop-scheduler', 'kube-scheduler'],
    ['stop-apiserver', 'kube-apiserver'],
  ] as const)
    it(`${action}: parks kubeadm's manifest, the kubelet kills the ${container} container; the revert brings it back`, async () => {
      await runAction(action, `kr_running ${container}`, `! kr_running ${container}`);
      await back(container);
    });

  it("leaves nothing behind after lab down: no process, mount, namespace, nor kubeadm's mount points", async () => {
    await stopLab(INSTANCE);
    expect(await leftovers(INSTANCE)).toEqual([]);
    expect(existsSync('/etc/kubernetes')).toBe(etcKubernetesBefore);
  });
});

describe('lab up --kubeadm with bad options', () => {
  it('refuses it without --real-nodes, with simulated nodes and on 1.20: exit 2, nothing made', async () => {
    const without = await labCli(['up', '--instance', 'e2ekq', '--kubeadm']);
    expect(without.code, without.stderr).toBe(2);
    expect(without.stderr).toContain('--kubeadm must be given with --real-nodes N');
    const sim = await labCli(['up', '--instance', 'e2ekq', '--kubeadm', '--real-nodes', '1', '--nodes', '2']);
    expect(sim.code, sim.stderr).toBe(2);
    expect(sim.stderr).toContain('--kubeadm runs real nodes only');
    const old = await labCli(['up', '--instance', 'e2ekq', '--kubeadm', '--real-nodes', '1', '--kubernetes-version', '1.20']);
    expect(old.code, old.stderr).toBe(2);
    expect(old.stderr).toContain('--kubeadm runs on Kubernetes 1.37 and 1.34');
    expect(await leftovers('e2ekq')).toEqual([]);
  });
});
