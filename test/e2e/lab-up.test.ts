import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CoordinationV1Api, type CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { realClock } from '../../src/core/clock.js';
import { Inventory } from '../../src/inventory/schema.js';
import { readLabInfo, readRuntime } from '../../src/lab/index.js';
import { coreApi, cli, inNetns, leftovers, startLab, stopLab, until, type LabInfo } from './helpers/lab.js';

/** `lab up` on the real binaries: nodes, pods, files, services and reachability as a user checks them. */
const INSTANCE = 'e2eup';
let lab: LabInfo;
let core: CoreV1Api;
let upMs: number;

beforeAll(async () => {
  const t0 = realClock.now();
  lab = await startLab({ instance: INSTANCE, nodes: 3, zones: 3 });
  upMs = realClock.now() - t0;
  core = coreApi(lab);
});

afterAll(async () => {
  await stopLab(INSTANCE);
  expect(await leftovers(INSTANCE)).toEqual([]);
});

const svc = (node: string, service: string, script: string) => join(lab.stateDir, 'nodes', node, service, script);

describe('lab up', () => {
  it('returns with every node Ready, in its zone, and every pod Running on the nodes', async () => {
    process.stderr.write(`[lab] up took ${upMs} ms\n`);
    const nodes = (await core.listNode()).items;
    expect(nodes.map((n) => n.metadata?.name).sort()).toEqual(['node-1', 'node-2', 'node-3']);
    for (const n of nodes) expect(n.status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('True');
    expect(nodes.map((n) => n.metadata?.labels?.['topology.kubernetes.io/zone']).sort()).toEqual(['zone-a', 'zone-b', 'zone-c']);
    const pods = (await core.listNamespacedPod({ namespace: 'demo' })).items;
    expect(pods).toHaveLength(6);
    expect(pods.every((p) => p.status?.phase === 'Running' && p.status.podIP)).toBe(true);
    expect(new Set(pods.map((p) => p.spec?.nodeName)).size).toBe(3);
    const endpoints = await core.readNamespacedEndpoints({ name: 'demo', namespace: 'demo' });
    expect(endpoints.subsets?.[0]?.addresses).toHaveLength(6);
  });

  it('runs each pod as simulated containers on its node', async () => {
    const pods = (await core.listNamespacedPod({ namespace: 'demo' })).items;
    for (const node of ['node-1', 'node-2', 'node-3']) {
      const rt = await readRuntime(lab.stateDir, node);
      const bound = pods.filter((p) => p.spec?.nodeName === node).map((p) => p.metadata?.uid).sort();
      expect(rt.containers.map((c) => c.podUid).sort()).toEqual(bound);
      expect(rt.kills).toEqual([]);
    }
  });

  it('renews each node Lease every lease-renew interval', async () => {
    const kc = new KubeConfig();
    kc.loadFromFile(lab.kubeconfig);
    const leases = kc.makeApiClient(CoordinationV1Api);
    const read = async () => new Date((await leases.readNamespacedLease({ name: 'node-2', namespace: 'kube-node-lease' })).spec!.renewTime!).getTime();
    const first = await read();
    await until('a renewal', async () => (await read()) > first, 5000, 100);
    const second = await read();
    expect(second - first).toBeGreaterThanOrEqual(1900);
    expect(second - first).toBeLessThanOrEqual(3000);
  });

  it('writes a kubeconfig and a valid lab inventory whose namespaces exist', async () => {
    expect(await readLabInfo(INSTANCE)).toMatchObject({ instance: INSTANCE, context: 'lab-e2eup', phase: 'up' });
    const inv = Inventory.parse(parse(await readFile(lab.inventoryFile, 'utf8')));
    expect(inv.spec.layout).toBe('lab');
    expect(inv.spec.transport).toEqual({ type: 'netns' });
    expect(inv.spec.controller).toMatchObject({ nodeMonitorGracePeriod: 8000, nodeMonitorPeriod: 1000, leaseDuration: 8000, defaultTolerationSeconds: 30 });
    for (const n of inv.spec.nodes) expect((await inNetns(n.netns!, 'ip -4 -o addr show eth0')).stdout).toContain(n.address);
    const kubeconfig = parse(await readFile(lab.kubeconfig, 'utf8')) as { 'current-context': string };
    expect(kubeconfig['current-context']).toBe('lab-e2eup');
  });

  it('serves the apiserver to this machine and to every node namespace', async () => {
    const ca = join(lab.stateDir, 'pki', 'ca.crt');
    for (const n of lab.nodes) {
      const r = await inNetns(n.netns, `curl -fsS --max-time 5 --cacert '${ca}' ${lab.apiserverUrl}/readyz`);
      expect(r.stdout, `${n.name}: ${r.stderr}`).toBe('ok');
    }
    const here = await cli(['lab', 'status', '--instance', INSTANCE]);
    expect(here.code, here.stderr).toBe(0);
    expect(here.stdout).toMatch(/kube-apiserver\s+healthy/);
  });

  it('has self-describing services: status, health, stop and start, also from inside the namespace', async () => {
    for (const s of ['etcd', 'kube-apiserver', 'kube-controller-manager', 'kube-scheduler'])
      expect((await inNetns('kr-e2eup-cp-1', `'${svc('cp-1', s, 'health')}'`)).code, s).toBe(0);
    const netns = 'kr-e2eup-node-2';
    expect((await inNetns(netns, `'${svc('node-2', 'kubelet', 'stop')}'`)).code).toBe(0);
    expect((await inNetns(netns, `'${svc('node-2', 'kubelet', 'status')}'`)).code).toBe(3);
    expect((await inNetns(netns, `'${svc('node-2', 'kubelet', 'stop')}'`)).code).toBe(0);
    expect((await inNetns(netns, `'${svc('node-2', 'kubelet', 'start')}'`)).code).toBe(0);
    expect((await inNetns(netns, `'${svc('node-2', 'kubelet', 'status')}'`)).code).toBe(0);
    await until('the restarted kubelet to renew its lease', async () => (await inNetns(netns, `'${svc('node-2', 'kubelet', 'health')}'`)).code === 0, 10_000);
    const pid = (await readFile(svc('node-2', 'kubelet', 'pid'), 'utf8')).trim();
    expect((await inNetns(netns, `ip netns identify ${pid}`)).stdout.trim()).toBe(netns);
  });

  it('runs etcd in the lab cgroup, also after a restart from inside the namespace', async () => {
    const cgroupOf = async () => readFile(`/proc/${(await readFile(svc('cp-1', 'etcd', 'pid'), 'utf8')).trim()}/cgroup`, 'utf8');
    expect(await cgroupOf()).toContain('kube-runbook-e2eup-etcd');
    expect((await inNetns('kr-e2eup-cp-1', `'${svc('cp-1', 'etcd', 'stop')}' && '${svc('cp-1', 'etcd', 'start')}'`)).code).toBe(0);
    await until('etcd healthy again', async () => (await inNetns('kr-e2eup-cp-1', `'${svc('cp-1', 'etcd', 'health')}'`)).code === 0, 30_000);
    expect(await cgroupOf()).toContain('kube-runbook-e2eup-etcd');
  });

  it('prints the environment and the containers from the CLI', async () => {
    const env = await cli(['lab', 'env', '--instance', INSTANCE]);
    expect(env.stdout).toBe(`export KUBECONFIG=${lab.kubeconfig}\nexport KUBE_RUNBOOK_INVENTORY=${lab.inventoryFile}\n`);
    const c = await cli(['lab', 'containers', 'node-1', '--instance', INSTANCE, '--json']);
    expect(c.code, c.stderr).toBe(0);
    const [state] = JSON.parse(c.stdout) as { node: string; containers: unknown[] }[];
    expect(state?.node).toBe('node-1');
    expect(state?.containers.length).toBe(2);
  });
});
