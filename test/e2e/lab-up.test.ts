import { execFileSync, spawn } from 'node:child_process';
import { connect } from 'node:net';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoordinationV1Api, type CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { parse, stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { realClock } from '../../src/core/clock.js';
import { Inventory } from '../../src/inventory/schema.js';
import { readLabInfo, readRuntime } from '../../packages/lab/src/index.js';
import { ensureAptPackages } from '../../packages/lab/src/install/install.js';
import { createLogger } from '../../src/core/logger.js';
import { coreApi, cli, inNetns, leftovers, startLab, stopLab, until, type LabInfo, labCli } from './helpers/lab.js';

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

/** Whether something accepts connections on 127.0.0.1:port. */
const listening = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
    socket.setTimeout(1000, () => socket.destroy(new Error('timeout')));
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
      const bound = pods
        .filter((p) => p.spec?.nodeName === node)
        .map((p) => p.metadata?.uid)
        .sort();
      expect(rt.containers.map((c) => c.podUid).sort()).toEqual(bound);
      expect(rt.kills).toEqual([]);
    }
  });

  it('renews each node Lease every lease-renew interval', async () => {
    const kc = new KubeConfig();
    kc.loadFromFile(lab.kubeconfig);
    const leases = kc.makeApiClient(CoordinationV1Api);
    const read = async () =>
      new Date((await leases.readNamespacedLease({ name: 'node-2', namespace: 'kube-node-lease' })).spec!.renewTime!).getTime();
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
    expect(inv.spec.controller).toMatchObject({
      nodeMonitorGracePeriod: 8000,
      nodeMonitorPeriod: 1000,
      leaseDuration: 8000,
      defaultTolerationSeconds: 30,
    });
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
    const here = await labCli(['status', '--instance', INSTANCE]);
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
    await until(
      'the restarted kubelet to renew its lease',
      async () => (await inNetns(netns, `'${svc('node-2', 'kubelet', 'health')}'`)).code === 0,
      10_000,
    );
    const pid = (await readFile(svc('node-2', 'kubelet', 'pid'), 'utf8')).trim();
    expect((await inNetns(netns, `ip netns identify ${pid}`)).stdout.trim()).toBe(netns);
  });

  it('runs etcd in the lab cgroup and each component in a cpu cgroup of its own, also after a restart from inside the namespace', async () => {
    const cgroupOf = async (service: string) =>
      readFile(`/proc/${(await readFile(svc('cp-1', service, 'pid'), 'utf8')).trim()}/cgroup`, 'utf8');
    // the cpu hierarchy's line on cgroup v1 (`N:cpu,cpuacct:/...`), the unified one's on v2 (`0::/...`)
    const cpuOf = async (service: string) =>
      (await cgroupOf(service)).split('\n').find((l) => /^\d+:([^:]*,)?cpu(,[^:]*)?:|^0::/.test(l)) ?? '';
    expect(await cgroupOf('etcd')).toContain('kube-runbook-e2eup-etcd');
    expect(await cpuOf('kube-apiserver')).toMatch(/:\/kube-runbook-e2eup-cp-1\/kube-apiserver$/);
    expect(await cpuOf('kube-scheduler')).toMatch(/:\/kube-runbook-e2eup-cp-1\/kube-scheduler$/);
    for (const service of ['etcd', 'kube-apiserver']) {
      expect((await inNetns('kr-e2eup-cp-1', `'${svc('cp-1', service, 'stop')}' && '${svc('cp-1', service, 'start')}'`)).code).toBe(0);
      await until(
        `${service} healthy again`,
        async () => (await inNetns('kr-e2eup-cp-1', `'${svc('cp-1', service, 'health')}'`)).code === 0,
        60_000,
      );
    }
    expect(await cgroupOf('etcd')).toContain('kube-runbook-e2eup-etcd');
    expect(await cpuOf('kube-apiserver')).toMatch(/:\/kube-runbook-e2eup-cp-1\/kube-apiserver$/);
  });

  it('prints the environment and the containers from the CLI', async () => {
    const env = await labCli(['env', '--instance', INSTANCE]);
    expect(env.stdout).toBe(`export KUBECONFIG=${lab.kubeconfig}\nexport KUBE_RUNBOOK_INVENTORY=${lab.inventoryFile}\n`);
    const c = await labCli(['containers', 'node-1', '--instance', INSTANCE, '--json']);
    expect(c.code, c.stderr).toBe(0);
    const [state] = JSON.parse(c.stdout) as { node: string; containers: unknown[] }[];
    expect(state?.node).toBe('node-1');
    expect(state?.containers.length).toBe(2);
  });
});

/**
 * A kubeconfig whose cluster sets `proxy-url`: the CLI reaches the lab's apiserver through Debian's tinyproxy (HTTP
 * CONNECT) and Dante (SOCKS5), and each proxy's own log shows the tunnel to the apiserver.
 */
describe('a kubeconfig with proxy-url', () => {
  const HTTP_PORT = 18_888;
  const SOCKS_PORT = 11_080;
  let dir: string;
  const proxies: { kill(): void }[] = [];
  const logs = { tinyproxy: '', danted: '' };

  const start = (name: keyof typeof logs, argv: string[]) => {
    const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.on('data', (b: Buffer) => (logs[name] += b.toString()));
    child.stderr.on('data', (b: Buffer) => (logs[name] += b.toString()));
    // a proxy that dies says so in its log, which the assertions print
    child.on('exit', (code, signal) => (logs[name] += `\n[${name} exited: ${code ?? signal}]\n`));
    proxies.push(child);
  };
  /** The lab's kubeconfig with proxy-url set on its cluster. */
  const kubeconfigVia = async (proxyUrl: string, name: string) => {
    const kc = parse(await readFile(lab.kubeconfig, 'utf8')) as { clusters: { cluster: Record<string, unknown> }[] };
    for (const c of kc.clusters) c.cluster['proxy-url'] = proxyUrl;
    const file = join(dir, name);
    await writeFile(file, stringify(kc));
    return file;
  };
  const plan = (kubeconfig: string) =>
    cli(['plan', 'runbooks/apiserver-outage.yaml', '--inventory', lab.inventoryFile, '--kubeconfig', kubeconfig]);

  beforeAll(async () => {
    await ensureAptPackages(['tinyproxy', 'dante-server'], { log: createLogger((_l, msg) => process.stderr.write(`[proxies] ${msg}\n`)) });
    dir = await mkdtemp(join(tmpdir(), 'kr-proxy-'));
    // the address this machine reaches the apiserver from: the tunnels leave from it
    const via = /\bsrc (\S+)/.exec(
      execFileSync('ip', ['-4', 'route', 'get', new URL(lab.apiserverUrl).hostname], { encoding: 'utf8' }),
    )?.[1];
    expect(via, 'a route to the apiserver').toBeDefined();
    await writeFile(
      join(dir, 'tinyproxy.conf'),
      [
        'User nobody',
        'Group nogroup',
        `Port ${HTTP_PORT}`,
        'Listen 127.0.0.1',
        'Allow 127.0.0.1',
        'LogLevel Connect',
        'MaxClients 20',
        '',
      ].join('\n'),
    );
    await writeFile(
      join(dir, 'danted.conf'),
      [
        'logoutput: stderr',
        `internal: 127.0.0.1 port = ${SOCKS_PORT}`,
        `external: ${via}`,
        'clientmethod: none',
        'socksmethod: none',
        'user.privileged: root',
        'user.unprivileged: nobody',
        'client pass { from: 127.0.0.1/32 to: 0.0.0.0/0 log: connect }',
        'socks pass { from: 127.0.0.1/32 to: 0.0.0.0/0 log: connect }',
        '',
      ].join('\n'),
    );
    start('tinyproxy', ['/usr/bin/tinyproxy', '-d', '-c', join(dir, 'tinyproxy.conf')]);
    start('danted', ['/usr/sbin/danted', '-f', join(dir, 'danted.conf')]);
    await until('both proxies to listen', async () => (await listening(HTTP_PORT)) && (await listening(SOCKS_PORT)), 20_000).catch(
      (e: unknown) => {
        throw new Error(`${String(e)}\ntinyproxy: ${logs.tinyproxy.slice(-500)}\ndanted: ${logs.danted.slice(-500)}`);
      },
    );
  });

  afterAll(async () => {
    for (const p of proxies) p.kill();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('plans against the cluster through an HTTP proxy and through a SOCKS5 proxy', async () => {
    const port = new URL(lab.apiserverUrl).port;
    // each proxy's own log: tinyproxy names the CONNECT to the apiserver, Dante the connections it accepted
    for (const [name, url, logged] of [
      ['tinyproxy', `http://127.0.0.1:${HTTP_PORT}`, `:${port}`],
      ['danted', `socks5://127.0.0.1:${SOCKS_PORT}`, `tcp/accept [: 127.0.0.1.`],
    ] as const) {
      const before = logs[name].length;
      const r = await plan(await kubeconfigVia(url, `${name}.kubeconfig`));
      expect(r.code, `${name}: ${r.stderr}\n${name}'s log: ${logs[name].slice(-800)}`).toBe(0);
      expect(r.stdout).toContain('apiserver-outage');
      await until(`${name} to log the plan's connection`, () => logs[name].slice(before).includes(logged), 5_000);
    }
  });

  it('says which proxy it could not reach (exit 3), and refuses a proxy-url kubectl would not take (exit 2)', async () => {
    const down = await plan(await kubeconfigVia('http://127.0.0.1:1', 'down.kubeconfig'));
    expect(down.code, down.stderr).toBe(3);
    expect(down.stderr).toContain('127.0.0.1:1');
    const bad = await plan(await kubeconfigVia('ftp://user:secret@proxy.example:21', 'bad.kubeconfig'));
    expect(bad.code, bad.stderr).toBe(2);
    expect(bad.stderr).toContain('proxy-url');
    expect(bad.stderr).not.toContain('secret');
  });
});
