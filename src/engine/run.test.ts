import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { RunEvent } from './events.js';
import { Journal, readJournal } from '../journal/journal.js';
import { ReportCollector } from '../report/collect.js';
import { type ActionRecord, recordingAction, ScriptedProbe } from '../testing/fake-modules.js';
import { baseRunbook, startTestRun } from '../testing/engine-harness.js';
import { startRemediatingRun } from '../testing/remediating-run.js';
import { FakeClock, flush } from '../testing/fake-clock.js';
import { redactEvent } from './sinks.js';

const ops = (log: ActionRecord[], op: ActionRecord['op']) =>
  log.filter((r) => r.op === op).map((r) => `${r.action}@${r.node ?? 'cluster'}`);
const stepEnds = (events: RunEvent[]) =>
  events.filter((e): e is Extract<RunEvent, { type: 'step-end' }> => e.type === 'step-end').map((e) => `${e.index}:${e.status}`);

describe('run: rollback always', () => {
  it('a passing run reverts every fault in reverse order', async () => {
    const log: ActionRecord[] = [];
    const h = await startTestRun({
      runbook: baseRunbook({
        steps: [
          { action: 'fault-a', with: { nodes: 'workers' } },
          { action: 'fault-b', with: { nodes: { names: ['cp-1'] } } },
          { wait: '10s' },
        ],
      }),
      actions: [recordingAction('fault-a', log), recordingAction('fault-b', log)],
      probes: [],
    });
    await h.clock.runUntil(() => h.events.some((e) => e.type === 'run-end'));
    const r = await h.handle.result;
    expect(r).toMatchObject({ status: 'passed', exitCode: 0, remaining: [] });
    expect(ops(log, 'apply')).toEqual(['fault-a@node-1', 'fault-a@node-2', 'fault-a@node-3', 'fault-b@cp-1']);
    expect(ops(log, 'revert')[0]).toBe('fault-b@cp-1');
    expect(new Set(ops(log, 'revert').slice(1))).toEqual(new Set(['fault-a@node-1', 'fault-a@node-2', 'fault-a@node-3']));
  });

  it('a guard violation aborts and rolls back in reverse order, skipping the remaining steps', async () => {
    const log: ActionRecord[] = [];
    const guard = new ScriptedProbe('pods', { status: 'ok', value: null, detail: 'no deletions' });
    const h = await startTestRun({
      runbook: baseRunbook({
        guards: [{ probe: 'pods', onViolation: 'abort' }],
        steps: [
          { action: 'fault-a', with: { nodes: { names: ['node-1'] } } },
          { action: 'fault-b', with: { nodes: { names: ['node-2'] } } },
          { wait: '5m' },
          { action: 'fault-c', with: { nodes: { names: ['node-3'] } } },
        ],
      }),
      actions: [recordingAction('fault-a', log), recordingAction('fault-b', log), recordingAction('fault-c', log)],
      probes: [guard.probe],
    });
    await h.clock.advance(30_000);
    expect(ops(log, 'apply')).toEqual(['fault-a@node-1', 'fault-b@node-2']);
    guard.push('violated', '1 pod deleted');
    await h.clock.runUntil(() => h.events.some((e) => e.type === 'run-end'));
    const r = await h.handle.result;
    expect(r.status).toBe('aborted');
    expect(r.exitCode).toBe(1);
    expect(r.reason).toContain('guard pods violated: 1 pod deleted');
    expect(ops(log, 'revert')).toEqual(['fault-b@node-2', 'fault-a@node-1']);
    expect(ops(log, 'apply')).not.toContain('fault-c@node-3');
    expect(stepEnds(h.events)).toEqual(['1:passed', '2:passed', '3:aborted']);
    expect(guard.running).toBe(0);
  });

  it('a guard that read a violation during the steady-state checks aborts as it is armed: the first fault is not applied', async () => {
    const log: ActionRecord[] = [];
    const guard = new ScriptedProbe('fsync', { status: 'violated', value: 0.4, detail: 'p99 0.4 s' });
    const steady = new ScriptedProbe('ready', { status: 'ok', value: null, detail: '3/3 Ready' });
    const h = await startTestRun({
      runbook: baseRunbook({
        guards: [{ probe: 'fsync', onViolation: 'abort' }],
        steps: [
          { expect: { probe: 'ready' }, within: '1m' },
          { action: 'fault-a', with: { nodes: { names: ['node-1'] } } },
        ],
      }),
      actions: [recordingAction('fault-a', log)],
      probes: [guard.probe, steady.probe],
    });
    await h.clock.runUntil(() => h.events.some((e) => e.type === 'run-end'));
    const r = await h.handle.result;
    expect(r.status).toBe('aborted');
    expect(r.reason).toContain('guard fsync violated: p99 0.4 s');
    expect(ops(log, 'apply')).toEqual([]);
    expect(stepEnds(h.events)).toEqual(['1:passed']);
  });

  it('an interrupt during a step rolls back; exit code 130', async () => {
    const log: ActionRecord[] = [];
    const h = await startTestRun({
      runbook: baseRunbook({ steps: [{ action: 'fault-a', with: { nodes: { names: ['node-1'] } } }, { wait: '10m' }] }),
      actions: [recordingAction('fault-a', log)],
      probes: [],
    });
    await h.clock.advance(5_000);
    expect(ops(log, 'apply')).toEqual(['fault-a@node-1']);
    h.handle.interrupt('SIGINT');
    await h.clock.runUntil(() => h.events.some((e) => e.type === 'run-end'));
    const r = await h.handle.result;
    expect(r).toMatchObject({ status: 'interrupted', exitCode: 130, remaining: [] });
    expect(ops(log, 'revert')).toEqual(['fault-a@node-1']);
  });

  it('a second interrupt stops at once and names what remains and the recover command', async () => {
    const log: ActionRecord[] = [];
    const slow = recordingAction('fault-a', log);
    const revert = slow.revert.bind(slow);
    slow.revert = async (ctx, state) => {
      await ctx.clock.sleep(60_000, ctx.signal);
      await revert(ctx, state);
    };
    const h = await startTestRun({
      runbook: baseRunbook({ steps: [{ action: 'fault-a', with: { nodes: { names: ['node-1'] } } }, { wait: '10m' }] }),
      actions: [slow],
      probes: [],
    });
    await h.clock.advance(1_000);
    h.handle.interrupt('SIGINT');
    await h.clock.advance(1_000);
    h.handle.interrupt('SIGINT');
    const r = await h.handle.result;
    expect(r.status).toBe('rollback-incomplete');
    expect(r.exitCode).toBe(4);
    expect(r.remaining.map((f) => `${f.action}@${f.node}`)).toEqual(['fault-a@node-1']);
    expect(r.recoverCommand).toBe('kube-runbook recover run-test');
  });

  it("work an action runs in the executor ends when the run is stopped at once, though the action's revert never ran", async () => {
    const log: ActionRecord[] = [];
    const load = recordingAction('load', log, { targets: 'cluster', nodeSide: false });
    let ticks = 0;
    load.apply = async (ctx, state) => {
      ctx.tasks!.start('load/run-test', async (signal) => {
        while (!signal.aborted)
          await ctx.clock.sleep(100, signal).then(
            () => ticks++,
            () => {},
          );
      });
      return state;
    };
    // a revert that hangs: only the run's own stop can end the work
    load.revert = (ctx) => ctx.clock.sleep(3_600_000, ctx.signal);
    const h = await startTestRun({ runbook: baseRunbook({ steps: [{ action: 'load' }, { wait: '10m' }] }), actions: [load], probes: [] });
    expect(await h.clock.runUntil(() => ticks >= 10, 60_000)).toBe(true);
    h.handle.interrupt('SIGINT');
    await h.clock.advance(1_000);
    h.handle.interrupt('SIGINT');
    await h.handle.result;
    await flush();
    const stoppedAt = ticks;
    await h.clock.advance(10_000);
    expect(ticks).toBe(stoppedAt);
  });

  it('a failing step fails the run and still reverts; a failing revert makes it rollback-incomplete', async () => {
    const log: ActionRecord[] = [];
    const probe = new ScriptedProbe('leases', { status: 'ok', value: null, detail: 'fresh' });
    const h = await startTestRun({
      runbook: baseRunbook({
        steps: [
          { action: 'fault-a', with: { nodes: 'workers' } },
          { expect: { probe: 'leases', status: 'violated' }, within: '30s' },
        ],
      }),
      actions: [recordingAction('fault-a', log, { failRevert: 'node-2' })],
      probes: [probe.probe],
    });
    await h.clock.runUntil(() => h.events.some((e) => e.type === 'run-end'));
    const r = await h.handle.result;
    expect(r.status).toBe('rollback-incomplete');
    expect(r.exitCode).toBe(4);
    expect(r.reason).toMatch(/step 2 .* failed: .*did not read violated within 30s; last reading ok: fresh/);
    expect(r.remaining.map((f) => f.node)).toEqual(['node-2']);
    expect(ops(log, 'revert').sort()).toEqual(['fault-a@node-1', 'fault-a@node-2', 'fault-a@node-3']);
  });

  it('a failed steady-state check before any fault is a refusal (exit 3) and applies nothing', async () => {
    const log: ActionRecord[] = [];
    const ready = new ScriptedProbe('node-ready', { status: 'violated', value: null, detail: 'node-2 NotReady' });
    const h = await startTestRun({
      runbook: baseRunbook({
        steps: [{ expect: { probe: 'node-ready' }, within: '10s' }, { action: 'fault-a' }],
      }),
      actions: [recordingAction('fault-a', log)],
      probes: [ready.probe],
    });
    await h.clock.runUntil(() => h.events.some((e) => e.type === 'run-end'));
    const r = await h.handle.result;
    expect(r.status).toBe('refused');
    expect(r.exitCode).toBe(3);
    expect(log).toEqual([]);
  });
});

describe('run: preflight', () => {
  it('refuses a context the runbook does not allow, touching nothing', async () => {
    const log: ActionRecord[] = [];
    const h = await startTestRun({
      runbook: baseRunbook({
        safety: { allowContexts: ['staging-*'], maxUnavailable: { worker: '100%' } },
        steps: [{ action: 'fault-a' }],
      }),
      actions: [recordingAction('fault-a', log)],
      probes: [],
      context: 'production',
    });
    const r = await h.handle.result;
    expect(r.status).toBe('refused');
    expect(r.reason).toContain('context "production" is not in spec.safety.allowContexts (staging-*)');
    expect(r.reason).toMatch(
      /Run against an allowed context with --context NAME, or, .* add "production" \(or "production@\S+", which pins its server too\) to spec\.safety\.allowContexts in \S+/,
    );
    expect(log).toEqual([]);
    expect(h.nodes.calls).toEqual([]);
  });

  it('refuses when a target node is unreachable, naming it', async () => {
    const log: ActionRecord[] = [];
    const h = await startTestRun({
      runbook: baseRunbook({ steps: [{ action: 'fault-a', with: { nodes: 'workers' } }] }),
      actions: [recordingAction('fault-a', log)],
      probes: [],
    });
    h.nodes.handler = ({ node }) =>
      node === 'node-2' ? { code: 255, stdout: '', stderr: 'Connection refused' } : { code: 0, stdout: 'kube-runbook-ok', stderr: '' };
    const r = await h.handle.result;
    expect(r.status).toBe('refused');
    expect(r.reason).toContain('unreachable: node-2 (exit 255: Connection refused)');
    expect(log).toEqual([]);
  });

  it("checks the permissions the runbook's modules declare and refuses, naming the missing one and who needs it", async () => {
    const log: ActionRecord[] = [];
    const leader = new ScriptedProbe('leader', { status: 'ok', value: null, detail: 'led' });
    leader.probe.meta = {
      ...leader.probe.meta,
      access: [
        { apiGroup: 'coordination.k8s.io', resource: 'leases', verbs: ['list', 'watch'], namespace: { param: 'lease' }, why: 'test' },
      ],
    };
    const asked: string[] = [];
    const h = await startTestRun({
      runbook: baseRunbook({ guards: [{ probe: 'leader', with: { lease: 'kube-system/kcm' } }], steps: [{ action: 'fault-a' }] }),
      actions: [recordingAction('fault-a', log)],
      probes: [leader.probe],
      deny: (c) => {
        asked.push(`${c.verb} ${c.resource ?? c.path} ${c.namespace ?? ''}`.trim());
        return c.verb === 'watch' && c.resource === 'leases';
      },
    });
    const r = await h.handle.result;
    expect(r.status).toBe('refused');
    expect(r.reason).toContain('not allowed: watch leases.coordination.k8s.io in kube-system (for probe leader)');
    expect(asked.sort()).toEqual([
      'create leases kube-system',
      'get /version',
      'get leases kube-system',
      'get leases kube-system',
      'list leases kube-system',
      'list nodes',
      'update leases kube-system',
      'watch leases kube-system',
    ]);
    expect(log).toEqual([]);
  });
});

describe('run: remediation', () => {
  it('applies the remediation on a guard violation and undoes it only after rollback.waitFor reads ok', async () => {
    const h = await startRemediatingRun({ wait: '2m', within: '5m' });
    const { log, forecast, leases } = h;
    await h.trip();
    forecast.push('violated', 'first eviction in 19s');
    await h.clock.advance(1_000);
    expect(ops(log, 'apply')).toEqual(['partition@node-1', 'freeze@cp-1']);
    expect(h.events.filter((e) => e.type === 'guard-fired' && e.response === 'remediate')).toHaveLength(1);
    // steps go on after remediation; at the end, the fault is reverted but the remediation waits for fresh leases
    await h.clock.advance(3 * 60_000);
    expect(ops(log, 'revert')).toEqual(['partition@node-1']);
    await h.clock.advance(60_000);
    expect(ops(log, 'revert')).toEqual(['partition@node-1']);
    leases.push('ok', 'all leases fresh');
    await h.clock.runUntil(() => h.events.some((e) => e.type === 'run-end'));
    expect(ops(log, 'revert')).toEqual(['partition@node-1', 'freeze@cp-1']);
    const r = await h.handle.result;
    expect(r.status).toBe('passed');
    expect(h.events.some((e) => e.type === 'remediation' && e.phase === 'end')).toBe(true);
  });

  it('leaves the remediation in place, and says so, when waitFor never holds', async () => {
    const h = await startRemediatingRun({
      within: '1m',
      forecast: { status: 'violated', value: null, detail: 'eviction in 5s' },
      leases: { status: 'violated', value: null, detail: 'stale' },
    });
    const { log } = h;
    await h.clock.runUntil(() => h.events.some((e) => e.type === 'run-end'));
    const r = await h.handle.result;
    expect(r.status).toBe('rollback-incomplete');
    expect(r.remaining.map((f) => `${f.action}@${f.node}`)).toEqual(['freeze@cp-1']);
    expect(ops(log, 'revert')).toEqual(['partition@node-1']);
    expect(h.events.find((e) => e.type === 'rollback-wait' && e.phase === 'timeout')).toMatchObject({
      detail: expect.stringContaining('remediation left in place'),
    });
    // never without a timer: its dead-man (remediationTtl, 1h by default) stays armed, its keepalive touched once more
    // as the run leaves it, so it is undone 1h after the run ended unless recover does it first
    const cp = h.nodes.calls.filter((c) => c.node === 'cp-1');
    expect(cp.filter((c) => c.script.includes('rm -rf "$d" "$d.fired"'))).toEqual([]);
    expect(cp.filter((c) => c.script.includes('watch.sh')).map((c) => /sh "\$d\/watch\.sh" "\$d" (\d+)/.exec(c.script)?.[1])).toEqual([
      '3600',
    ]);
    // (the remediation was never reverted: the one touch-or-wait script on cp-1 is the touch as the run leaves it)
    expect(cp.filter((c) => c.script.includes('echo armed'))).toHaveLength(1);
  });
});

describe('run: guards that cannot see', () => {
  const unknownRun = (onUnknown: string, log: ActionRecord[], guard: ScriptedProbe) =>
    startTestRun({
      runbook: baseRunbook({
        guards: [{ probe: 'api', onUnknown, unknownFor: '20s' }],
        steps: [
          { action: 'fault-a', with: { nodes: { names: ['node-1'] } } },
          { wait: '10s' },
          { action: 'fault-b', with: { nodes: { names: ['node-2'] } } },
          { wait: '1m' },
        ],
      }),
      actions: [recordingAction('fault-a', log), recordingAction('fault-b', log)],
      probes: [guard.probe],
    });

  it('onUnknown: hold starts no new step while unknown and resumes when the guard sees again', async () => {
    const log: ActionRecord[] = [];
    const guard = new ScriptedProbe('api', { status: 'ok', value: null, detail: 'ready' });
    const h = await unknownRun('hold', log, guard);
    await h.clock.advance(1_000);
    guard.push('unknown', 'apiserver unreachable');
    await h.clock.advance(15_000);
    expect(ops(log, 'apply')).toEqual(['fault-a@node-1']);
    guard.push('ok', 'ready');
    await h.clock.advance(1_000);
    expect(ops(log, 'apply')).toEqual(['fault-a@node-1', 'fault-b@node-2']);
    await h.clock.runUntil(() => h.events.some((e) => e.type === 'run-end'));
    expect((await h.handle.result).status).toBe('passed');
  });

  it('onUnknown: hold aborts after unknownFor', async () => {
    const log: ActionRecord[] = [];
    const guard = new ScriptedProbe('api', { status: 'ok', value: null, detail: 'ready' });
    const h = await unknownRun('hold', log, guard);
    await h.clock.advance(1_000);
    guard.push('unknown', 'watch silent for 30s');
    await h.clock.runUntil(() => h.events.some((e) => e.type === 'run-end'));
    const r = await h.handle.result;
    expect(r.status).toBe('aborted');
    expect(r.reason).toContain('guard api unknown for 20s: watch silent for 30s');
    expect(ops(log, 'apply')).toEqual(['fault-a@node-1']);
    expect(ops(log, 'revert')).toEqual(['fault-a@node-1']);
  });

  it('onUnknown: abort aborts at once', async () => {
    const log: ActionRecord[] = [];
    const guard = new ScriptedProbe('api', { status: 'ok', value: null, detail: 'ready' });
    const h = await unknownRun('abort', log, guard);
    await h.clock.advance(1_000);
    guard.push('unknown', 'apiserver unreachable');
    await flush();
    await h.clock.runUntil(() => h.events.some((e) => e.type === 'run-end'));
    const r = await h.handle.result;
    expect(r.status).toBe('aborted');
    expect(r.reason).toContain('cannot see');
    expect(ops(log, 'revert')).toEqual(['fault-a@node-1']);
  });

  it('onUnknown: ignore goes on', async () => {
    const log: ActionRecord[] = [];
    const guard = new ScriptedProbe('api', { status: 'ok', value: null, detail: 'ready' });
    const h = await unknownRun('ignore', log, guard);
    await h.clock.advance(1_000);
    guard.push('unknown', 'apiserver unreachable');
    await h.clock.runUntil(() => h.events.some((e) => e.type === 'run-end'));
    const r = await h.handle.result;
    expect(r.status).toBe('passed');
    expect(ops(log, 'apply')).toEqual(['fault-a@node-1', 'fault-b@node-2']);
  });
});

describe('run: dead-man', () => {
  it('arms each fault on its node before applying it, keeps it alive, disarms it after the revert', async () => {
    const log: ActionRecord[] = [];
    const h = await startTestRun({
      runbook: baseRunbook({ steps: [{ action: 'fault-a', with: { nodes: { names: ['node-1'] } } }, { wait: '2m' }] }),
      actions: [recordingAction('fault-a', log)],
      probes: [],
    });
    const order: string[] = [];
    h.nodes.handler = ({ script }) => {
      if (script.includes('cat >"$d/watch.sh"')) order.push(`arm@${h.clock.now()}`);
      if (script.includes('/keepalive; do')) order.push('keepalive');
      if (script.includes('rm -rf "$d" "$d.fired"')) order.push('disarm');
      return { code: 0, stdout: script.includes('kube-runbook-ok') ? 'kube-runbook-ok' : '', stderr: '' };
    };
    await h.clock.runUntil(() => h.events.some((e) => e.type === 'run-end'));
    const applyAt = log.find((r) => r.op === 'apply')!.at;
    expect(order[0]).toBe(`arm@${applyAt}`);
    expect(order.filter((o) => o === 'keepalive').length).toBeGreaterThanOrEqual(4); // ttl 1m → every 15s over 2m
    expect(order[order.length - 1]).toBe('disarm');
    const arm = h.nodes.calls.find((c) => c.script.includes('watch.sh'))!.script;
    expect(arm).toContain('echo revert node-1');
  });

  it("a remediation's or protective step's dead-man waits for remediationTtl (1h by default), a fault's for faultTtl", async () => {
    const h = await startTestRun({
      runbook: baseRunbook({
        steps: [
          { action: 'protect', with: { nodes: { names: ['cp-1'] } }, revertLast: true },
          { action: 'fault-a', with: { nodes: { names: ['node-1'] } } },
        ],
      }),
      actions: [recordingAction('protect', []), recordingAction('fault-a', [])],
      probes: [],
    });
    await h.clock.runUntil(() => h.events.some((e) => e.type === 'run-end'));
    const ttlOf = (node: string) =>
      /setsid sh "\$d\/watch\.sh" "\$d" (\d+)/.exec(
        h.nodes.calls.find((c) => c.node === node && c.script.includes('cat >"$d/watch.sh"'))!.script,
      )?.[1];
    expect(ttlOf('cp-1')).toBe('3600');
    expect(ttlOf('node-1')).toBe('60');
  });
});

describe('run: revert steps', () => {
  it('reverts the named step now, and rollback does not revert it twice', async () => {
    const log: ActionRecord[] = [];
    const h = await startTestRun({
      runbook: baseRunbook({
        steps: [
          { name: 'outage', action: 'fault-a', with: { nodes: { names: ['cp-1'] } } },
          { name: 'partition', action: 'fault-b', with: { nodes: { names: ['node-1', 'node-2'] } } },
          { revert: 'outage' },
          { wait: '10s' },
        ],
      }),
      actions: [recordingAction('fault-a', log), recordingAction('fault-b', log)],
      probes: [],
    });
    await h.clock.advance(5_000);
    expect(ops(log, 'revert')).toEqual(['fault-a@cp-1']);
    await h.clock.runUntil(() => h.events.some((e) => e.type === 'run-end'));
    expect((await h.handle.result).status).toBe('passed');
    expect(ops(log, 'revert').filter((x) => x === 'fault-a@cp-1')).toHaveLength(1);
    expect(ops(log, 'revert').slice(1).sort()).toEqual(['fault-b@node-1', 'fault-b@node-2']);
  });

  it('refuses a revert step that names no earlier action step', async () => {
    await expect(
      startTestRun({
        runbook: baseRunbook({ steps: [{ revert: 'outage' }, { name: 'outage', action: 'fault-a' }] }),
        actions: [recordingAction('fault-a', [])],
        probes: [],
      }),
    ).rejects.toThrow(/spec\.steps\[0\]\.revert: no earlier action step is named "outage"/);
  });
});

describe('run: a runbook that only observes', () => {
  it('arms its guards at the first step that is not a steady-state check', async () => {
    const eps = new ScriptedProbe('endpoints', { status: 'ok', value: null, detail: 'stable' });
    const h = await startTestRun({
      runbook: baseRunbook({
        guards: [{ probe: 'endpoints', onViolation: 'abort' }],
        steps: [{ expect: { probe: 'endpoints' }, within: '10s' }, { wait: '5m' }],
      }),
      actions: [],
      probes: [eps.probe],
    });
    await h.clock.advance(60_000);
    eps.push('violated', 'endpoints demo/web deleted while its Service exists');
    await h.clock.runUntil(() => h.events.some((e) => e.type === 'run-end'));
    const r = await h.handle.result;
    expect(r.status).toBe('aborted');
    expect(r.reason).toContain('endpoints demo/web deleted while its Service exists');
  });
});

describe('run: protective steps (revertLast)', () => {
  it('are reverted after the faults and only once rollback.waitFor holds', async () => {
    const log: ActionRecord[] = [];
    const leases = new ScriptedProbe('leases', { status: 'violated', value: null, detail: 'node-1 stale' });
    const h = await startTestRun({
      runbook: baseRunbook({
        steps: [
          { name: 'freeze', action: 'freeze', with: { nodes: 'control-plane' }, revertLast: true },
          { name: 'stop kubelets', action: 'stop-kubelet', with: { nodes: 'workers' } },
          { wait: '1m' },
        ],
        rollback: { waitFor: { probe: 'leases' }, within: '10m' },
      }),
      actions: [recordingAction('freeze', log, { kind: 'remediation' }), recordingAction('stop-kubelet', log)],
      probes: [leases.probe],
    });
    await h.clock.advance(2 * 60_000);
    expect(ops(log, 'revert').sort()).toEqual(['stop-kubelet@node-1', 'stop-kubelet@node-2', 'stop-kubelet@node-3']);
    leases.push('ok', 'all fresh');
    await h.clock.runUntil(() => h.events.some((e) => e.type === 'run-end'));
    expect(ops(log, 'revert').at(-1)).toBe('freeze@cp-1');
    expect((await h.handle.result).status).toBe('passed');
  });
});

describe('run: a dead-man that cannot be disarmed', () => {
  it('is journaled and reported as a warning that says its watcher may run the revert again', async () => {
    const journal = new Journal(join(mkdtempSync(join(tmpdir(), 'kr-disarm-')), 'run.jsonl'));
    const h = await startTestRun({
      runbook: baseRunbook({ steps: [{ action: 'fault-a', with: { nodes: { names: ['node-1'] } } }] }),
      actions: [recordingAction('fault-a', [])],
      probes: [],
      journal,
    });
    h.nodes.handler = ({ script }) =>
      script.includes('rm -rf "$d" "$d.fired"')
        ? { code: 1, stdout: '', stderr: 'rm: cannot remove: read-only file system' }
        : { code: 0, stdout: script.includes('kube-runbook-ok') ? 'kube-runbook-ok' : '', stderr: '' };
    await h.clock.runUntil(() => h.events.some((e) => e.type === 'run-end'));
    const report = new ReportCollector();
    for (const e of h.events) report.onEvent(redactEvent(e));
    expect(report.report.warnings?.map((w) => w.message)).toEqual([
      expect.stringMatching(
        /^dead-man of f01-fault-a-node-1 on node-1 not disarmed \(rm: cannot remove: read-only file system\): without keepalive its watcher runs the fault's revert again/,
      ),
    ]);
    const lines = readFileSync(journal.file, 'utf8');
    expect(readJournal(journal.file).faults.map((f) => f.reverted)).toEqual([true]);
    expect(lines).toContain('"type":"disarm-failed","at"');
  });
});

describe("run: the journal's in-cluster copy", () => {
  const journalIn = (copy: ConstructorParameters<typeof Journal>[1]) =>
    new Journal(join(mkdtempSync(join(tmpdir(), 'kr-copy-')), 'run.jsonl'), copy);

  it('holds each fault before it is applied', async () => {
    const log: ActionRecord[] = [];
    const seen: { text: string; applies: number }[] = [];
    const clock = new FakeClock();
    // a write takes a second (an apiserver under load): what was applied is counted when the copy holds the text
    const write = async (text: string) => {
      await clock.sleep(1000);
      seen.push({ text, applies: ops(log, 'apply').length });
    };
    const journal = journalIn({ write, failed: () => {} });
    const h = await startTestRun({
      runbook: baseRunbook({ steps: [{ action: 'fault-a', with: { nodes: { names: ['node-1'] } } }] }),
      actions: [recordingAction('fault-a', log)],
      probes: [],
      journal,
      clock,
    });
    await h.clock.runUntil(() => h.events.some((e) => e.type === 'run-end'));
    expect((await h.handle.result).status).toBe('passed');
    const first = seen.find((s) => s.text.includes('"type":"prepared"'));
    expect(first?.applies).toBe(0);
    expect(ops(log, 'apply')).toEqual(['fault-a@node-1']);
    // the last records (the revert, the end) once the command waits for them
    const synced = journal.synced();
    await clock.advance(5000);
    expect(await synced).toBe(true);
    expect(seen.at(-1)?.text).toBe(readFileSync(journal.file, 'utf8'));
  });

  it('that cannot be written does not hold the run back: the fault is applied after 10 s, with a warning', async () => {
    const log: ActionRecord[] = [];
    const journal = journalIn({ write: () => new Promise<void>(() => {}), failed: () => {} });
    const h = await startTestRun({
      runbook: baseRunbook({ steps: [{ action: 'fault-a', with: { nodes: { names: ['node-1'] } } }] }),
      actions: [recordingAction('fault-a', log)],
      probes: [],
      journal,
    });
    await h.clock.runUntil(() => h.events.some((e) => e.type === 'fault-applied'));
    expect(ops(log, 'apply')).toEqual(['fault-a@node-1']);
    expect(h.events.filter((e) => e.type === 'log' && e.level === 'warn').map((e) => (e as { message: string }).message)).toContainEqual(
      expect.stringMatching(/^f01-fault-a-node-1: the cluster's copy of the journal does not hold this fault/),
    );
    await h.clock.runUntil(() => h.events.some((e) => e.type === 'run-end'));
    expect((await h.handle.result).status).toBe('passed');
  });
});
