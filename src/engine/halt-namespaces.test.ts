import { describe, expect, it } from 'vitest';
import { type ActionRecord, recordingAction } from '../testing/fake-modules.js';
import { baseRunbook, startTestRun } from '../testing/engine-harness.js';
import { FakeClock } from '../testing/fake-clock.js';
import { fakeKubeAccess } from '../testing/fake-access.js';
import { setHalt } from '../kube/halt.js';

const ops = (log: ActionRecord[], op: ActionRecord['op']) =>
  log.filter((r) => r.op === op).map((r) => `${r.action}@${r.node ?? 'cluster'}`);

/** A run locked in `lockNamespace` holding one fault on node-1 for an hour; `halt` sets the halt of a namespace. */
async function heldRun(lockNamespace: string) {
  const clock = new FakeClock();
  const kube = fakeKubeAccess(clock, { context: 'lab' });
  const log: ActionRecord[] = [];
  const h = await startTestRun({
    runbook: baseRunbook({
      safety: { allowContexts: ['lab'], faultTtl: '1m', lockNamespace, maxUnavailable: { worker: '100%' } },
      steps: [{ action: 'fault-a', with: { nodes: { names: ['node-1'] } } }, { wait: '1h' }],
    }),
    actions: [recordingAction('fault-a', log)],
    probes: [],
    clock,
    kube,
  });
  await clock.runUntil(() => ops(log, 'apply').length > 0, 60_000);
  const halt = (namespace: string) => setHalt(kube, { namespace, by: 'alice@ops', reason: 'outage', clock });
  return { clock, kube, log, h, halt };
}

describe('run: which halts stop it', () => {
  it("a run in lock namespace kr-locks rolls back on a halt of kube-system (the cluster's)", async () => {
    const { clock, log, h, halt } = await heldRun('kr-locks');
    await halt('kube-system');
    const at = clock.now();
    await clock.runUntil(() => ops(log, 'revert').length > 0, 60_000);
    expect(clock.now() - at).toBeLessThanOrEqual(5_000);
    const r = await h.handle.result;
    expect(r).toMatchObject({ status: 'halted', exitCode: 1, remaining: [] });
    expect(r.reason).toMatch(/^HALTED: halted by alice@ops since \S+ \(Lease kube-system\/kube-runbook-halt\): outage$/);
  });

  it('a run in lock namespace kr-locks rolls back on a halt of kr-locks (its own)', async () => {
    const { log, h, halt, clock } = await heldRun('kr-locks');
    await halt('kr-locks');
    await clock.runUntil(() => ops(log, 'revert').length > 0, 60_000);
    const r = await h.handle.result;
    expect(r.status).toBe('halted');
    expect(r.reason).toContain('(Lease kr-locks/kube-runbook-halt): outage');
  });

  it('a halt of kr-locks does not stop a run in kube-system', async () => {
    const { clock, log, h, halt } = await heldRun('kube-system');
    await halt('kr-locks');
    await clock.advance(60_000);
    expect(ops(log, 'revert')).toEqual([]);
    expect(h.events.some((e) => e.type === 'rollback-start')).toBe(false);
    await halt('kube-system');
    await clock.runUntil(() => ops(log, 'revert').length > 0, 60_000);
    expect((await h.handle.result).status).toBe('halted');
  });
});

describe('preflight: which halts it reads', () => {
  const refusedBy = async (o: { lockNamespace: string; halted?: string; deny?: (ns?: string, name?: string) => boolean }) => {
    const clock = new FakeClock();
    const kube = fakeKubeAccess(clock, { context: 'lab' });
    const deny = o.deny;
    if (deny) kube.deny = (c) => c.resource === 'leases' && c.verb === 'get' && deny(c.namespace, c.name);
    if (o.halted) await setHalt(kube, { namespace: o.halted, by: 'alice@ops', reason: 'outage', clock });
    const log: ActionRecord[] = [];
    const h = await startTestRun({
      runbook: baseRunbook({
        safety: { allowContexts: ['lab'], faultTtl: '1m', lockNamespace: o.lockNamespace, maxUnavailable: { worker: '100%' } },
        steps: [{ action: 'fault-a', with: { nodes: { names: ['node-1'] } } }],
      }),
      actions: [recordingAction('fault-a', log)],
      probes: [],
      clock,
      kube,
    });
    await clock.runUntil(() => h.events.some((e) => e.type === 'run-end'));
    const r = await h.handle.result;
    const halt = h.events.find((e) => e.type === 'preflight' && e.check === 'halt');
    return { r, log, halt: halt && 'detail' in halt ? halt.detail : undefined };
  };

  it('names both Leases a run outside kube-system follows, and refuses at either halt with how to resume it', async () => {
    const free = await refusedBy({ lockNamespace: 'kr-locks' });
    expect(free.r.status).toBe('passed');
    expect(free.halt).toBe('no halt is set (Leases kube-system/kube-runbook-halt, kr-locks/kube-runbook-halt)');
    const cluster = await refusedBy({ lockNamespace: 'kr-locks', halted: 'kube-system' });
    expect(cluster.r).toMatchObject({ status: 'refused', exitCode: 3 });
    expect(cluster.r.reason).toMatch(
      /halt: halted by alice@ops since \S+ \(Lease kube-system\/kube-runbook-halt\): outage; no run starts until `kube-runbook resume`/,
    );
    expect(cluster.log).toEqual([]);
    const own = await refusedBy({ lockNamespace: 'kr-locks', halted: 'kr-locks' });
    expect(own.r.reason).toMatch(/\(Lease kr-locks\/kube-runbook-halt\): outage; no run starts until `kube-runbook resume -n kr-locks`/);
  });

  it("a run in kube-system reads the cluster's halt only, and starts while another namespace is halted", async () => {
    const r = await refusedBy({ lockNamespace: 'kube-system', halted: 'kr-locks' });
    expect(r.r.status).toBe('passed');
    expect(r.halt).toBe('no halt is set (Lease kube-system/kube-runbook-halt)');
  });

  it("refuses, naming the permission, when the run may not read the cluster's halt", async () => {
    const r = await refusedBy({ lockNamespace: 'kr-locks', deny: (ns, name) => ns === 'kube-system' && name === 'kube-runbook-halt' });
    expect(r.r).toMatchObject({ status: 'refused', exitCode: 3 });
    expect(r.r.reason).toContain('not allowed: get leases.coordination.k8s.io kube-runbook-halt in kube-system (for the halt)');
    expect(r.log).toEqual([]);
  });
});
