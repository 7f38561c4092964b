import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { parse, stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { realClock } from '../../src/core/clock.js';
import { runAndMeasure } from '../../packages/lab/src/cli/demo.js';
import { expectObjectivesMet } from './helpers/objectives.js';
import { cli, instanceFor, labCli, labBinaries, leftovers, REPO, startLab, stopLab, until, whyRun, type LabInfo } from './helpers/lab.js';

/**
 * `lab up --kubeadm --control-planes 3 --real-nodes 1 --prometheus`: an HA control plane made by the release's kubeadm
 * as its HA guide makes one (stacked etcd, HAProxy as the controlPlaneEndpoint, `kubeadm init --upload-certs` on
 * cp-1, `kubeadm join --control-plane` of cp-2 and cp-3), Prometheus scraping every member, and
 * runbooks/control-plane-member-loss.yaml on it with cp-1 leading etcd:
 * exit 0, every fault reverted, the worker's Node Ready throughout and the demo pods the same pods, counted by this
 * file's own sampling of the API and by the worker's containerd, not by the run. What kubeadm does that the lab's own
 * HA control plane does not: each member's kubelet talks to its own apiserver, so cp-1's Node goes NotReady while
 * its apiserver is down, which the sampling shows too.
 */
const INSTANCE = instanceFor('kha');
const MEMBERS = ['cp-1', 'cp-2', 'cp-3'];

let lab: LabInfo;
let core: CoreV1Api;
const work = mkdtempSync(join(tmpdir(), 'kr-kha-'));

beforeAll(async () => {
  const t0 = realClock.now();
  lab = await startLab({ instance: INSTANCE, nodes: 0, realNodes: 1, kubeadm: true, controlPlanes: 3, prometheus: true });
  process.stderr.write(`[lab] up with kubeadm init, 2 control-plane joins and 1 worker join took ${realClock.now() - t0} ms\n`);
  const kc = new KubeConfig();
  kc.loadFromFile(lab.kubeconfig);
  core = kc.makeApiClient(CoreV1Api);
}, 1_200_000);

afterAll(async () => {
  rmSync(work, { recursive: true, force: true });
  await stopLab(INSTANCE);
  expect(await leftovers(INSTANCE)).toEqual([]);
});

/** etcdctl on this machine against the members (or `endpoints`), with the client certificate kubeadm made for its health checks. */
async function etcdctl(
  args: string[],
  endpoints = MEMBERS.map((m) => `https://${lab.nodes.find((n) => n.name === m)!.ip}:2379`).join(','),
): Promise<string> {
  const bin = await labBinaries();
  const pki = join(lab.stateDir, 'nodes', 'cp-1', 'kubernetes', 'pki', 'etcd');
  return execFileSync(
    join(bin.dir, 'etcdctl'),
    [
      `--endpoints=${endpoints}`,
      `--cacert=${join(pki, 'ca.crt')}`,
      `--cert=${join(pki, 'healthcheck-client.crt')}`,
      `--key=${join(pki, 'healthcheck-client.key')}`,
      '--command-timeout=5s',
      ...args,
    ],
    { encoding: 'utf8' },
  );
}

interface EndpointStatus {
  Endpoint: string;
  Status: { header: { member_id: number }; leader: number };
}
const endpointStatus = async () => JSON.parse(await etcdctl(['endpoint', 'status', '-w', 'json'])) as EndpointStatus[];

/** Moves etcd's leadership to `name`, so the run meets an etcd election too. */
async function makeEtcdLeader(name: string): Promise<void> {
  const ip = lab.nodes.find((n) => n.name === name)!.ip;
  await until(
    `etcd's leader to be ${name}`,
    async () => {
      const all = await endpointStatus();
      const target = all.find((s) => s.Endpoint.includes(`//${ip}:`))!;
      const leader = all.find((s) => s.Status.header.member_id === s.Status.leader);
      if (target.Status.leader === target.Status.header.member_id) return true;
      if (leader) await etcdctl(['move-leader', target.Status.header.member_id.toString(16)], leader.Endpoint);
      return false;
    },
    30_000,
    1000,
  );
}

/** Every 250 ms until stopped: each Node's Ready status as the API gives it, whenever it changes. */
function sampleReady(): () => Promise<Record<string, string[]>> {
  const seen: Record<string, string[]> = {};
  let stop = false;
  const loop = (async () => {
    while (!stop) {
      const list = await core.listNode().catch(() => undefined);
      for (const n of list?.items ?? []) {
        const status = n.status?.conditions?.find((c) => c.type === 'Ready')?.status ?? 'none';
        const name = n.metadata!.name!;
        if ((seen[name] ??= []).at(-1) !== status) seen[name].push(status);
      }
      await realClock.sleep(250);
    }
  })();
  return async () => {
    stop = true;
    await loop;
    return seen;
  };
}

const demoPods = async () =>
  (await core.listNamespacedPod({ namespace: 'demo' })).items.map((p) => `${p.metadata!.name}@${p.metadata!.uid}`).sort();

describe('an HA control plane made by kubeadm', () => {
  it('has three members, each joined by kubeadm with its own etcd member, static pods and local endpoints, each scraped by Prometheus', async () => {
    const nodes = (await core.listNode()).items;
    expect(nodes.map((n) => n.metadata!.name).sort()).toEqual([...MEMBERS, 'rnode-1']);
    for (const n of nodes) expect(n.status?.conditions?.find((c) => c.type === 'Ready')?.status, n.metadata!.name).toBe('True');
    const members = JSON.parse(await etcdctl(['member', 'list', '-w', 'json'])) as { members: { name: string; IsLearner?: boolean }[] };
    expect(members.members.map((m) => m.name).sort()).toEqual(MEMBERS);
    expect(members.members.some((m) => m.IsLearner)).toBe(false);
    const pods = (await core.listNamespacedPod({ namespace: 'kube-system' })).items;
    for (const m of MEMBERS) {
      const ip = lab.nodes.find((n) => n.name === m)!.ip;
      const apiserver = pods.find((p) => p.metadata!.name === `kube-apiserver-${m}`);
      expect(apiserver?.metadata?.annotations?.['kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint']).toBe(`${ip}:6443`);
      for (const c of ['etcd', 'kube-controller-manager', 'kube-scheduler'])
        expect(pods.find((p) => p.metadata!.name === `${c}-${m}`)?.status?.phase, `${c}-${m}`).toBe('Running');
      // kubeadm points a member's kubelet at its own apiserver; a worker's goes through the VIP
      const conf = parse(readFileSync(join(lab.stateDir, 'nodes', m, 'kubernetes', 'kubelet.conf'), 'utf8')) as {
        clusters: { cluster: { server: string } }[];
      };
      expect(conf.clusters[0]!.cluster.server).toBe(`https://${ip}:6443`);
    }
    const worker = parse(readFileSync(join(lab.stateDir, 'nodes', 'rnode-1', 'kubernetes', 'kubelet.conf'), 'utf8')) as {
      clusters: { cluster: { server: string } }[];
    };
    expect(worker.clusters[0]!.cluster.server).toBe(lab.apiserverUrl);
    const cluster = parse(
      (await core.readNamespacedConfigMap({ name: 'kubeadm-config', namespace: 'kube-system' })).data!.ClusterConfiguration!,
    ) as { controlPlaneEndpoint: string };
    expect(`https://${cluster.controlPlaneEndpoint}`).toBe(lab.apiserverUrl);
    // `lab status` reads kubeadm's etcd over TLS, with kubeadm's health-check certificate, as etcdctl did above
    const status = await labCli(['status', '--instance', INSTANCE]);
    const roles = MEMBERS.map((m) => new RegExp(`^\\s+${m}\\s+https://\\S+:2379\\s+(leader|follower)$`, 'm').exec(status.stdout)?.[1]);
    expect(roles, status.stdout).not.toContain(undefined);
    expect(
      roles.filter((r) => r === 'leader'),
      status.stdout,
    ).toHaveLength(1);
    // --prometheus: Prometheus, another node, scrapes each member's etcd (kubeadm's metrics port), apiserver,
    // controller-manager and scheduler, which kubeadm binds to 127.0.0.1 unless the lab says otherwise
    const targets = (await (await fetch(`${lab.prometheus!.url}/api/v1/targets?state=active`)).json()) as {
      data: { activeTargets: { labels: { job: string; node: string }; scrapeUrl: string; health: string }[] };
    };
    const up = targets.data.activeTargets.filter((t) => t.health === 'up').map((t) => `${t.labels.job}@${t.labels.node}`);
    for (const job of ['etcd', 'kube-apiserver', 'kube-controller-manager', 'kube-scheduler'])
      expect(up, JSON.stringify(targets.data.activeTargets)).toEqual(expect.arrayContaining(MEMBERS.map((m) => `${job}@${m}`)));
    expect(targets.data.activeTargets.find((t) => t.labels.job === 'etcd')?.scrapeUrl).toMatch(/:2381\/metrics$/);
  });

  // the inventory names kubeadm's /etc/kubernetes and each member's mount namespace: an action on cp-2 must park
  // cp-2's manifest, not cp-1's (a path of this machine for every member would send it to one member's files)
  it("stop-scheduler on cp-2 parks cp-2's own manifest: cp-1's and cp-3's schedulers run on; the revert brings cp-2's back", async () => {
    const file = join(work, 'stop-scheduler-cp-2.yaml');
    writeFileSync(
      file,
      stringify({
        apiVersion: 'kube-runbook/v1',
        kind: 'Runbook',
        metadata: { name: 'stop-scheduler-cp-2', description: "stop-scheduler on one member of kubeadm's HA control plane" },
        spec: {
          safety: { allowContexts: ['lab-*'], maxDuration: '5m', faultTtl: '3m', maxUnavailable: { controlPlane: '100%' } },
          steps: [
            { name: "stop cp-2's scheduler", action: 'stop-scheduler', with: { nodes: { names: ['cp-2'] } } },
            { name: 'hold', wait: '5s' },
          ],
        },
      }),
    );
    const parked = (m: string) => existsSync(join(lab.stateDir, 'nodes', m, 'kubernetes', 'kube-runbook-parked', 'kube-scheduler.yaml'));
    const inManifests = (m: string) => existsSync(join(lab.stateDir, 'nodes', m, 'kubernetes', 'manifests', 'kube-scheduler.yaml'));
    const seen = new Set<string>();
    let stop = false;
    // sampled by this file from each member's own directory and from the API, apart from the run
    const sampling = (async () => {
      while (!stop) {
        for (const m of MEMBERS) {
          if (parked(m)) seen.add(`${m} parked`);
          if (!inManifests(m)) seen.add(`${m} manifest away`);
        }
        const pods = await core.listNamespacedPod({ namespace: 'kube-system' }).catch(() => undefined);
        for (const m of MEMBERS) {
          const pod = pods?.items.find((p) => p.metadata!.name === `kube-scheduler-${m}`);
          if (pods && !pod?.status?.containerStatuses?.[0]?.state?.running) seen.add(`${m} not running`);
        }
        await realClock.sleep(250);
      }
    })();
    const r = await cli(['run', file, '-i', lab.inventoryFile, '--yes', '-o', 'text'], { timeoutMs: 300_000 });
    stop = true;
    await sampling;
    console.log(`stop-scheduler on cp-2 of kubeadm's HA control plane: exit ${r.code}; seen: ${[...seen].sort().join(', ')}`);
    expect(r.code, `${r.stdout}\n${r.stderr}`).toBe(0);
    expect(r.stdout).toContain('reverted stop-scheduler on cp-2');
    expect(
      [...seen].filter((x) => !x.startsWith('cp-2 ')),
      "the other members' schedulers and manifests",
    ).toEqual([]);
    expect(seen).toContain('cp-2 parked');
    expect(seen).toContain('cp-2 manifest away');
    for (const m of MEMBERS) expect([parked(m), inManifests(m)], m).toEqual([false, true]);
    await until(
      "cp-2's scheduler running again",
      async () => {
        const pod = await core.readNamespacedPod({ name: 'kube-scheduler-cp-2', namespace: 'kube-system' }).catch(() => undefined);
        return Boolean(pod?.status?.containerStatuses?.[0]?.state?.running);
      },
      60_000,
      500,
    );
  });

  it('control-plane-member-loss with cp-1 leading etcd: exit 0, all reverted, the worker Ready and its pods untouched', async () => {
    await makeEtcdLeader('cp-1');
    const podsBefore = await demoPods();
    expect(podsBefore.length).toBeGreaterThan(0);
    const done = sampleReady();
    const o = await runAndMeasure(lab, join(REPO, 'runbooks', 'control-plane-member-loss.yaml'), true);
    const ready = await done();
    console.log(`control-plane-member-loss on kubeadm: exit ${o.exitCode}; Ready as sampled: ${JSON.stringify(ready)}`);
    expect(o.exitCode, whyRun(o)).toBe(0);
    expect(o.report.remaining).toEqual([]);
    // counted apart from the run: the API's Nodes, sampled here; the demo pods' identities; the worker's containerd
    for (const n of ['cp-2', 'cp-3', 'rnode-1']) expect(ready[n], n).toEqual(['True']);
    expect(ready['cp-1']).toEqual(['True', 'Unknown', 'True']);
    expect(await demoPods()).toEqual(podsBefore);
    expect(o.killed).toEqual([]);
    expect(o.realContainersAtStart).toBeGreaterThan(0);
    const leader = (await endpointStatus()).find((s) => s.Status.leader === s.Status.header.member_id);
    expect(leader, 'etcd has a leader after the run').toBeDefined();
    expectObjectivesMet(o.report, 'control-plane-member-loss', [
      'etcd has three members and a leader again',
      'the leaders renew their Leases',
      'every lease fresh',
    ]);
  });
});
