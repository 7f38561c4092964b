import { describe, expect, it } from 'vitest';
import type { SimContainer } from './runtime.js';
import { newer } from './list-watch.js';
import {
  conditionsChanged,
  freePodIp,
  kubeletConditions,
  leaseObject,
  microTime,
  podCidrOf,
  podStatusCurrent,
  podStatusPatch,
} from './objects.js';
import { decidePod, orphanedPods } from './reconcile.js';
import type { PodLite } from './types.js';

const T = Date.UTC(2026, 0, 1, 0, 0, 5, 123);
const container = (podUid: string, podIp = '100.64.1.2'): SimContainer => ({
  id: `c-${podUid}`,
  namespace: 'demo',
  pod: `p-${podUid}`,
  podUid,
  container: 'web',
  image: 'pause',
  podIp,
  startedAt: '2026-01-01T00:00:00Z',
});
const pod = (uid: string, extra: Partial<PodLite> = {}): PodLite => ({ metadata: { name: `p-${uid}`, namespace: 'demo', uid }, ...extra });

describe('what the simulator posts', () => {
  it('writes lease renew times as MicroTime (six fractional digits)', () => {
    expect(microTime(T)).toBe('2026-01-01T00:00:05.123000Z');
    const lease = leaseObject({ name: 'node-1', leaseDurationMs: 8000 } as never, T, { resourceVersion: '42', nodeUid: 'u' });
    expect(lease.spec).toEqual({ holderIdentity: 'node-1', leaseDurationSeconds: 8, renewTime: '2026-01-01T00:00:05.123000Z' });
    expect(lease.metadata).toMatchObject({
      namespace: 'kube-node-lease',
      resourceVersion: '42',
      ownerReferences: [{ kind: 'Node', uid: 'u' }],
    });
  });

  it('sees the controller setting Ready=Unknown as a change to report', () => {
    const ours = { metadata: { name: 'n' }, status: { conditions: kubeletConditions(undefined, T) } };
    expect(conditionsChanged(ours)).toBe(false);
    const unknown = {
      metadata: { name: 'n' },
      status: {
        conditions: ours.status.conditions.map((c) => (c.type === 'Ready' ? { ...c, status: 'Unknown', reason: 'NodeStatusUnknown' } : c)),
      },
    };
    expect(conditionsChanged(unknown)).toBe(true);
    expect(conditionsChanged(undefined)).toBe(true);
  });

  it('keeps a condition transition time while its status stays, and moves the heartbeat', () => {
    const first = kubeletConditions(undefined, T);
    const later = kubeletConditions({ metadata: { name: 'n' }, status: { conditions: first } }, T + 60_000);
    expect(later.every((c, i) => c.lastTransitionTime === first[i]!.lastTransitionTime)).toBe(true);
    expect(later[0]!.lastHeartbeatTime).toBe('2026-01-01T00:01:05Z');
  });

  it('reports a pod Running and Ready with its IP and one status per container', () => {
    const patch = podStatusPatch('10.213.0.3', [container('u1')], T);
    expect(patch.status).toMatchObject({ phase: 'Running', hostIP: '10.213.0.3', podIP: '100.64.1.2', podIPs: [{ ip: '100.64.1.2' }] });
    expect(patch.status.conditions.map((c) => c.type)).toEqual(['Initialized', 'Ready', 'ContainersReady', 'PodScheduled']);
    expect(patch.status.containerStatuses[0]).toMatchObject({
      name: 'web',
      ready: true,
      containerID: 'kr-sim://c-u1',
      state: { running: {} },
    });
    const current = { ...pod('u1'), status: JSON.parse(JSON.stringify(patch.status)) as PodLite['status'] };
    expect(podStatusCurrent(current, [container('u1')])).toBe(true);
    expect(podStatusCurrent(current, [container('u1', '100.64.1.9')])).toBe(false);
    expect(podStatusCurrent(pod('u1'), [container('u1')])).toBe(false);
  });

  it('hands out the lowest free pod IP and distinct pod CIDRs', () => {
    expect(freePodIp('100.64.1.0/24', new Set(['100.64.1.2', '100.64.1.3']))).toBe('100.64.1.4');
    expect(podCidrOf(1)).toBe('100.64.1.0/24');
    expect(podCidrOf(256 + 5)).toBe('100.65.5.0/24');
  });
});

describe('what the simulator does with a pod', () => {
  it('kills and finalizes a pod marked for deletion, finalizes one with nothing running', () => {
    const marked = pod('u1', { metadata: { name: 'p', uid: 'u1', deletionTimestamp: '2026-01-01T00:00:30Z' } });
    expect(decidePod(marked, [container('u1')], true)).toEqual({
      kind: 'kill-and-finalize',
      reason: 'pod marked for deletion (deletionTimestamp 2026-01-01T00:00:30Z)',
    });
    expect(decidePod(marked, [], true)).toEqual({ kind: 'finalize' });
  });

  it('starts a new pod, reports a stale status, leaves finished pods alone', () => {
    expect(decidePod(pod('u1'), [], false).kind).toBe('start');
    expect(decidePod(pod('u1'), [container('u1')], false).kind).toBe('report');
    expect(decidePod(pod('u1'), [container('u1')], true).kind).toBe('none');
    expect(decidePod(pod('u1', { status: { phase: 'Succeeded' } }), [], false).kind).toBe('none');
  });

  it('finds containers whose pod the apiserver no longer has', () => {
    expect(orphanedPods([container('u1'), container('u2'), container('u2')], [pod('u1')])).toEqual([
      { podUid: 'u2', namespace: 'demo', pod: 'p-u2' },
    ]);
  });

  it('never lets a watch go back to an older resourceVersion', () => {
    expect(newer('120', '99')).toBe(true);
    expect(newer('99', '120')).toBe(false);
    expect(newer('5', '')).toBe(true);
  });
});

describe('the status of a container whose command runs for real (the node agent)', () => {
  it('an exit reads as a kubelet shows it: CrashLoopBackOff, the last state with its code and last words, not Ready', () => {
    const s = podStatusPatch('10.0.0.1', [container('a')], T, {
      kind: 'exited',
      exitCode: 3,
      message: 'may not get leases',
      restarts: 2,
    }).status;
    expect(s.conditions.find((c) => c.type === 'Ready')?.status).toBe('False');
    expect(s.containerStatuses[0]).toMatchObject({
      ready: false,
      restartCount: 2,
      state: { waiting: { reason: 'CrashLoopBackOff' } },
      lastState: { terminated: { exitCode: 3, message: 'may not get leases' } },
    });
  });

  it('an image the lab does not have reads as ErrImagePull; a running one as running and Ready', () => {
    const pulled = podStatusPatch('10.0.0.1', [container('a')], T, {
      kind: 'image',
      reason: 'ErrImagePull',
      message: 'manifest unknown',
    }).status;
    expect(pulled.containerStatuses[0]).toMatchObject({
      ready: false,
      state: { waiting: { reason: 'ErrImagePull', message: 'manifest unknown' } },
    });
    const running = podStatusPatch('10.0.0.1', [container('a')], T, { kind: 'running' }).status;
    expect(running.containerStatuses[0]).toMatchObject({ ready: true, state: { running: { startedAt: '2026-01-01T00:00:00Z' } } });
    expect(running.conditions.find((c) => c.type === 'Ready')?.status).toBe('True');
  });

  it('a token it cannot have yet (a pod the node authorizer does not know yet) reads as ContainerCreating, Pending, not an exit', () => {
    const s = podStatusPatch('10.0.0.1', [container('a')], T, {
      kind: 'creating',
      message: "cannot mount its ServiceAccount token: no relationship found between node 'node-2' and this object",
    }).status;
    expect(s.phase).toBe('Pending');
    expect(s.containerStatuses[0]).toMatchObject({ ready: false, restartCount: 0, state: { waiting: { reason: 'ContainerCreating' } } });
    expect(s.containerStatuses[0]).not.toHaveProperty('lastState');
  });
});
