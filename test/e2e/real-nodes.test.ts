import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { CoreV1Api, Exec, KubeConfig, VersionApi, type V1Status } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { realClock } from '../../src/core/clock.js';
import { labNames, rebootLabNode } from '../../src/lab/index.js';
import { cli, leftovers, startLab, stopLab, until, type LabInfo } from './helpers/lab.js';

/**
 * Real nodes (`lab up --real-nodes 2`): the release's kubelet with containerd and runc, the sample Deployment in
 * real containers reached through the apiserver (exec, logs), and nothing left after `lab down`. Fails, never
 * skips, on a machine that cannot run them.
 */
const INSTANCE = 'e2ern';
const SYSCTLS = ['vm/overcommit_memory', 'kernel/panic', 'kernel/panic_on_oops'];
const sysctls = () => SYSCTLS.map((k) => readFileSync(`/proc/sys/${k}`, 'utf8').trim());

let lab: LabInfo;
let kc: KubeConfig;
let core: CoreV1Api;
let before: string[];

beforeAll(async () => {
  before = sysctls();
  const t0 = realClock.now();
  lab = await startLab({ instance: INSTANCE, nodes: 0, realNodes: 2 });
  process.stderr.write(`[lab] up with 2 real nodes took ${realClock.now() - t0} ms\n`);
  kc = new KubeConfig();
  kc.loadFromFile(lab.kubeconfig);
  core = kc.makeApiClient(CoreV1Api);
});

afterAll(async () => {
  await stopLab(INSTANCE);
});

/** Runs `command` in a pod's container through the apiserver and the node's kubelet; its stdout, stderr and status. */
async function exec(namespace: string, pod: string, command: string[]): Promise<{ stdout: string; stderr: string; status: string }> {
  let stdout = '';
  let stderr = '';
  const sink = (add: (s: string) => void) =>
    new Writable({
      write(chunk: Buffer, _enc, cb) {
        add(chunk.toString());
        cb();
      },
    });
  const status = await new Promise<string>((resolve, reject) => {
    const timer = realClock.setTimer(30_000, () => reject(new Error(`exec in ${pod} did not end within 30 s`)));
    new Exec(kc)
      .exec(namespace, pod, 'web', command, sink((s) => (stdout += s)), sink((s) => (stderr += s)), null, false, (st: V1Status) => {
        timer();
        resolve(st.status ?? '');
      })
      .catch((e: unknown) => {
        timer();
        reject(e instanceof Error ? e : new Error(String(e)));
      });
  });
  return { stdout, stderr, status };
}

describe('lab up --real-nodes 2', () => {
  it("makes two Ready nodes whose kubelet is the apiserver's release, on containerd 2", async () => {
    const server = await kc.makeApiClient(VersionApi).getCode();
    const nodes = (await core.listNode()).items;
    expect(nodes.map((n) => n.metadata?.name).sort()).toEqual(['rnode-1', 'rnode-2']);
    for (const n of nodes) {
      expect(n.status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('True');
      expect(n.status?.nodeInfo?.kubeletVersion).toBe(server.gitVersion);
      expect(n.status?.nodeInfo?.containerRuntimeVersion).toMatch(/^containerd:\/\/2\./);
      expect(n.status?.addresses?.find((a) => a.type === 'InternalIP')?.address).toBe(lab.nodes.find((x) => x.name === n.metadata?.name)?.ip);
    }
  });

  it("runs the Deployment's pods in real containers: exec and logs work through the apiserver", async () => {
    const pods = (await core.listNamespacedPod({ namespace: 'demo' })).items;
    expect(pods).toHaveLength(4);
    expect(new Set(pods.map((p) => p.spec?.nodeName))).toEqual(new Set(['rnode-1', 'rnode-2']));
    const names = labNames(INSTANCE);
    for (const p of pods) {
      const name = p.metadata!.name!;
      expect(p.status?.phase).toBe('Running');
      expect(p.status?.containerStatuses?.[0]?.containerID).toMatch(/^containerd:\/\/[0-9a-f]{64}$/);
      const log = await core.readNamespacedPodLog({ name, namespace: 'demo', container: 'web' });
      expect(log).toContain(`demo: serving on ${name}`);
      const r = await exec('demo', name, ['sh', '-c', 'cat /proc/1/cgroup; wget -qO- http://127.0.0.1:8080/']);
      expect(r.status, r.stderr).toBe('Success');
      expect(r.stdout).toContain(`demo on ${name}`);
      // the container lives under its node's cgroup, in the pods' part the kubelet made
      expect(r.stdout).toContain(`/${names.nodeCgroup(p.spec!.nodeName!)}/kubepods/`);
    }
    const failed = await exec('demo', pods[0]!.metadata!.name!, ['sh', '-c', 'exit 3']);
    expect(failed.status).toBe('Failure');
  });

  it("loses its containers in a reboot, and its kubelet starts them again", async () => {
    const ids = async () =>
      Object.fromEntries(
        (await core.listNamespacedPod({ namespace: 'demo', fieldSelector: 'spec.nodeName=rnode-1' })).items.map((p) => [p.metadata!.name!, p.status?.containerStatuses?.[0]?.containerID ?? '']),
      );
    const before = await ids();
    expect(Object.keys(before)).toHaveLength(2);
    const r = await rebootLabNode(INSTANCE, 'rnode-1');
    // its containerd and kubelet, and for each pod a shim, the pause process and httpd
    expect(r.killed).toBeGreaterThanOrEqual(2 + 3 * 2);
    expect(r.started).toEqual(['containerd', 'kubelet']);
    await until(
      'the pods of rnode-1 running in new containers',
      async () => {
        const after = await ids();
        return Object.keys(before).every((p) => after[p] && after[p] !== before[p]);
      },
      90_000,
      500,
    );
  });

  it('leaves no process, mount, cgroup, namespace, chain or kernel setting behind after lab down', async () => {
    await stopLab(INSTANCE);
    expect(await leftovers(INSTANCE)).toEqual([]);
    expect(sysctls()).toEqual(before);
  });
});

describe('lab up --real-nodes where containerd does not start', () => {
  const BROKEN = 'e2erb';
  const dir = mkdtempSync(join(tmpdir(), 'kr-containerd-'));
  afterAll(async () => {
    await stopLab(BROKEN);
    rmSync(dir, { recursive: true, force: true });
  });

  it('says so, quoting its log, exits 2 and leaves nothing behind', async () => {
    writeFileSync(join(dir, 'containerd'), '#!/bin/sh\necho "containerd: failed to mount the overlay snapshotter (a broken runtime)" >&2\nexit 1\n', { mode: 0o755 });
    for (const f of ['ctr', 'containerd-shim-runc-v2']) writeFileSync(join(dir, f), '#!/bin/sh\nexit 1\n', { mode: 0o755 });
    const r = await cli(['lab', 'up', '--instance', BROKEN, '--nodes', '0', '--real-nodes', '1'], { env: { ...process.env, KUBE_RUNBOOK_CONTAINERD_DIR: dir } });
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toContain('containerd of rnode-1 exited at start');
    expect(r.stderr).toContain('failed to mount the overlay snapshotter (a broken runtime)');
    expect(await leftovers(BROKEN)).toEqual([]);
  });
});
