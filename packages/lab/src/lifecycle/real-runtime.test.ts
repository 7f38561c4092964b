import { chmod, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tempDirEach } from 'kube-runbook/internal/testing/temp-dir.js';
import { realClock } from 'kube-runbook/internal/core/clock.js';
import { isKrError } from 'kube-runbook/internal/core/errors.js';
import { parseRuntime, processStart, readRealRuntime, runtimeChange, type RealContainer, type RealRuntimeState } from './real-runtime.js';

const ID = (n: number) => String(n).repeat(64).slice(0, 64);

const info = (id: string, pod: string, uid: string, createdAt = '2026-11-27T16:00:00.000000000Z') =>
  JSON.stringify(
    {
      ID: id,
      Labels: {
        'io.cri-containerd.kind': 'container',
        'io.kubernetes.container.name': 'web',
        'io.kubernetes.pod.name': pod,
        'io.kubernetes.pod.namespace': 'demo',
        'io.kubernetes.pod.uid': uid,
      },
      CreatedAt: createdAt,
      Spec: { ociVersion: '1.2.0' },
    },
    null,
    4,
  );

let dir = '';
tempDirEach('kr-rt-', (d) => (dir = d));

describe('a real node read through ctr', () => {
  it("lists its pods' containers with their task state, pid and start time, from ctr over the node's socket", async () => {
    const ctr = join(dir, 'ctr');
    const args = join(dir, 'args');
    // a ctr that answers as containerd 2's does: tasks (sandboxes among them), the containers a label selects, their info
    await writeFile(
      ctr,
      `#!/bin/sh
echo "$*" >> ${args}
case "$*" in
  *"tasks ls"*) printf 'TASK    PID    STATUS\\n${ID(1)}    ${process.pid}    RUNNING\\n${ID(2)}    0    STOPPED\\n${ID(9)}    ${process.pid}    RUNNING\\n' ;;
  *"containers ls -q"*) printf '${ID(1)}\\n${ID(2)}\\n${ID(3)}\\n' ;;
  *"info ${ID(1)}"*) cat <<'EOF'
${info(ID(1), 'web-a', 'uid-a')}
EOF
  ;;
  *"info ${ID(2)}"*) cat <<'EOF'
${info(ID(2), 'web-b', 'uid-b')}
EOF
  ;;
  *) echo "ctr: container not found" >&2; exit 1 ;;
esac
`,
    );
    await chmod(ctr, 0o755);
    const socket = join(dir, 'containerd.sock');
    const s = await readRealRuntime({
      name: 'rnode-1',
      netns: 'kr-t-rnode-1',
      ip: '10.0.0.211',
      roles: ['worker'],
      real: true,
      runtime: { ctr, socket },
    });
    expect(s.node).toBe('rnode-1');
    // the third container was removed between the listing and its info: left out
    expect(s.containers.map((c) => [c.pod, c.running])).toEqual([
      ['web-a', true],
      ['web-b', false],
    ]);
    const a = s.containers[0]!;
    expect(a).toMatchObject({
      id: ID(1),
      namespace: 'demo',
      podUid: 'uid-a',
      container: 'web',
      pid: process.pid,
      createdAt: '2026-11-27T16:00:00.000000000Z',
    });
    // this test's own process stands in for the task: it started before now, and after the machine booted
    expect(Date.parse(a.startedAt!)).toBeLessThanOrEqual(realClock.now());
    expect(Date.parse(a.startedAt!)).toBeGreaterThan(realClock.now() - process.uptime() * 1000 - 60_000);
    const calls = (await import('node:fs')).readFileSync(args, 'utf8');
    expect(calls).toContain(`--address ${socket} --namespace k8s.io`);
    expect(calls).toContain('containers ls -q labels."io.cri-containerd.kind"==container');
  });

  it('says which node could not be read, and why', async () => {
    const ctr = join(dir, 'ctr');
    await writeFile(ctr, '#!/bin/sh\necho "ctr: failed to dial: connection refused" >&2\nexit 1\n');
    await chmod(ctr, 0o755);
    const e = await readRealRuntime({
      name: 'rnode-2',
      netns: 'n',
      ip: 'i',
      roles: ['worker'],
      real: true,
      runtime: { ctr, socket: join(dir, 's') },
    }).catch((x: unknown) => x);
    expect(isKrError(e) && e.code).toBe('LAB_REAL_NODE_RUNTIME');
    expect((e as Error).message).toBe("reading rnode-2's containerd failed: ctr: failed to dial: connection refused");
  });

  it('reads a process start time from /proc/PID/stat, whatever its command is called', () => {
    // field 22 is 12345 ticks after boot; the command has spaces and parentheses
    const stat = `42 (sh (x) y) S 1 42 42 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 12345 1000 10 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0`;
    expect(processStart(stat, 1_700_000_000)).toBe(new Date(1_700_000_000_000 + 123_450).toISOString());
    expect(processStart(undefined, 1_700_000_000)).toBeUndefined();
  });

  it('parses an empty node', () => {
    expect(parseRuntime('rnode-3', 'TASK    PID    STATUS\n')).toEqual({ node: 'rnode-3', containers: [] });
  });
});

describe('what changed between two readings', () => {
  const c = (id: number, pod: string, o: Partial<RealContainer> = {}): RealContainer => ({
    node: 'rnode-1',
    id: ID(id),
    namespace: 'demo',
    pod,
    podUid: `uid-${pod}`,
    container: 'web',
    createdAt: '2026-11-27T16:00:00Z',
    running: true,
    pid: 100 + id,
    startedAt: '2026-11-27T16:00:01.000Z',
    ...o,
  });
  const on = (...containers: RealContainer[]): RealRuntimeState[] => [{ node: 'rnode-1', containers }];

  it('nothing killed when the same containers run with the same start times', () => {
    expect(runtimeChange(on(c(1, 'a'), c(2, 'b')), on(c(1, 'a'), c(2, 'b')))).toEqual({ killed: [], started: [] });
  });

  it("a container stopped or removed was killed; a new pod's container was started", () => {
    const ch = runtimeChange(on(c(1, 'a'), c(2, 'b'), c(3, 'c')), on(c(1, 'a', { running: false }), c(3, 'c'), c(4, 'd')));
    expect(ch.killed.map((k) => [k.pod, k.restarted])).toEqual([
      ['a', false],
      ['b', false],
    ]);
    expect(ch.started.map((k) => k.pod)).toEqual(['d']);
  });

  it('a pod running its container again under a new id, or the same task started anew, was restarted', () => {
    const ch = runtimeChange(
      on(c(1, 'a'), c(2, 'b')),
      on(c(1, 'a', { running: false }), c(5, 'a'), c(2, 'b', { startedAt: '2026-11-27T16:05:00.000Z' })),
    );
    expect(ch.killed.map((k) => [k.pod, k.restarted])).toEqual([
      ['a', true],
      ['b', true],
    ]);
    expect(ch.started.map((k) => k.id)).toEqual([ID(5), ID(2)]);
  });

  it('a container that was not running before is not counted as killed', () => {
    expect(runtimeChange(on(c(1, 'a', { running: false })), on()).killed).toEqual([]);
  });

  it('the same id on another node is another container', () => {
    const other: RealRuntimeState = { node: 'rnode-2', containers: [c(1, 'a', { node: 'rnode-2' })] };
    const ch = runtimeChange([...on(c(1, 'a')), other], [...on(c(1, 'a')), { node: 'rnode-2', containers: [] }]);
    expect(ch.killed.map((k) => k.node)).toEqual(['rnode-2']);
  });
});
