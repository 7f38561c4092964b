import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { EXIT, isKrError } from 'kube-runbook/internal/core/errors.js';
import type { LabInfo, LabNodeInfo } from '../host/info.js';
import { labContainers, renderContainers } from './containers.js';
import { renderStatus } from './render.js';
import type { LabStatus } from './status.js';

const ID = (c: string) => c.repeat(64);

const ctrInfo = (id: string, pod: string) =>
  JSON.stringify({
    ID: id,
    Labels: {
      'io.kubernetes.container.name': 'web',
      'io.kubernetes.pod.name': pod,
      'io.kubernetes.pod.namespace': 'demo',
      'io.kubernetes.pod.uid': `uid-${pod}`,
    },
    CreatedAt: '2026-11-27T16:00:00Z',
  });

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'kr-containers-'));
});
afterEach(() => rm(dir, { recursive: true, force: true }));

/** A lab of node-1 (simulated, one container), rnode-1 (containerd: one running, one exited) and rnode-2 (containerd down). */
async function lab(): Promise<LabInfo> {
  const ctr = join(dir, 'ctr');
  await writeFile(
    ctr,
    `#!/bin/sh
case "$*" in
  *down.sock*) echo "ctr: failed to dial: connection refused" >&2; exit 1 ;;
  *"tasks ls"*) printf 'TASK PID STATUS\\n${ID('a')} 0 RUNNING\\n${ID('b')} 0 STOPPED\\n' ;;
  *"containers ls -q"*) printf '${ID('a')}\\n${ID('b')}\\n' ;;
  *"info ${ID('a')}"*) echo '${ctrInfo(ID('a'), 'web-a')}' ;;
  *"info ${ID('b')}"*) echo '${ctrInfo(ID('b'), 'web-b')}' ;;
esac
`,
  );
  await chmod(ctr, 0o755);
  const runtime = join(dir, 'nodes', 'node-1', 'runtime');
  await mkdir(runtime, { recursive: true });
  const sim = {
    node: 'node-1',
    namespace: 'demo',
    pod: 'web-s',
    podUid: 'uid-s',
    container: 'web',
    podIp: '10.244.1.2',
    startedAt: '2026-11-27T15:00:00.000Z',
  };
  await writeFile(join(runtime, 'containers.json'), JSON.stringify({ containers: [sim] }));
  const node = (name: string, o: Partial<LabNodeInfo> = {}): LabNodeInfo => ({
    name,
    netns: `kr-t-${name}`,
    ip: '10.0.0.9',
    roles: ['worker'],
    ...o,
  });
  const nodes = [
    node('cp-1', { roles: ['control-plane', 'etcd'] }),
    node('node-1'),
    node('rnode-1', { real: true, runtime: { ctr, socket: join(dir, 'up.sock') } }),
    node('rnode-2', { real: true, runtime: { ctr, socket: join(dir, 'down.sock') } }),
  ];
  return { instance: 't', stateDir: dir, nodes } as unknown as LabInfo;
}

describe('lab containers', () => {
  it("lists the simulated nodes' containers and each real node's from its containerd: pod, container, id, state, since", async () => {
    const text = renderContainers(await labContainers(await lab()));
    expect(text.split('\n')).toEqual([
      'node-1: 1 running, 0 killed',
      '  running  demo/web-s web 10.244.1.2 since 2026-11-27T15:00:00.000Z',
      'rnode-1: 1 running, 1 exited (containerd)',
      // a task whose process is gone has no start time: its creation stands in
      `  running  demo/web-a web ${ID('a').slice(0, 13)} since 2026-11-27T16:00:00Z`,
      `  exited   demo/web-b web ${ID('b').slice(0, 13)} created 2026-11-27T16:00:00Z`,
      'rnode-2: 0 running, 0 exited (containerd)',
      "  (containerd unreadable: reading rnode-2's containerd failed: ctr: failed to dial: connection refused)",
    ]);
  });

  it('one node on its own; a node that is not there is refused with exit 2, naming the nodes', async () => {
    const info = await lab();
    const one = await labContainers(info, 'rnode-1');
    expect(one).toEqual([expect.objectContaining({ node: 'rnode-1', runtime: 'containerd' })]);
    expect(one[0]!.containers.map((c) => c.id)).toEqual([ID('a'), ID('b')]);
    const e = await labContainers(info, 'rnode-9').catch((x: unknown) => x);
    expect(isKrError(e) && e.code).toBe('LAB_BAD_NODE');
    expect(isKrError(e) && e.exit).toBe(EXIT.invalid);
    expect(String((e as Error).message)).toContain('"rnode-9"');
    expect(String((e as Error).message)).toContain('node-1, rnode-1, rnode-2');
  });
});

describe('lab status', () => {
  it("shows real nodes' containers under their own heading, beside the simulated ones' counts", async () => {
    const info = await lab();
    const [sim, ...real] = await labContainers(info);
    const status = {
      info: { ...info, apiserverUrl: 'https://10.0.0.1:6443', phase: 'up', settings: {} },
      components: [],
      runtimes: [sim],
      realRuntimes: real,
    } as unknown as LabStatus;
    const text = renderStatus(status);
    expect(text).toContain('SIMULATED CONTAINERS\n  node-1     1 running, 0 killed');
    expect(text).toContain(
      [
        'REAL CONTAINERS (containerd)',
        `  rnode-1    running  demo/web-a web ${ID('a').slice(0, 13)} since 2026-11-27T16:00:00Z`,
        `  rnode-1    exited   demo/web-b web ${ID('b').slice(0, 13)} created 2026-11-27T16:00:00Z`,
        "  rnode-2    (containerd unreadable: reading rnode-2's containerd failed: ctr: failed to dial: connection refused)",
      ].join('\n'),
    );
  });
});
