import { describe, expect, it } from 'vitest';
import { CUT, cutOffRun, partition, T0 } from '../../test/fixtures/cut-off-run.js';
import type { RunEvent } from '../engine/events.js';
import { ReportCollector, type Observation } from './collect.js';
import { redactEvent } from '../engine/sinks.js';
import evictionForecast from '../probes/eviction-forecast.js';
import nodeLeases from '../probes/node-leases.js';
import nodeReady from '../probes/node-ready.js';
import noexecuteTaints from '../probes/noexecute-taints.js';
import podDeletions from '../probes/pod-deletions.js';
import http from '../probes/http.js';
import { guardReading, withFacts } from '../testing/reading-facts.js';

const iso = (s: number) => new Date(T0 + s * 1000).toISOString();
const reading = (s: number, value: unknown) => ({ status: 'ok' as const, at: T0 + s * 1000, detail: '', value });
const leases = (s: number, nodes: { name: string; ageMs: number | null; stale: boolean }[]) =>
  reading(s, { nodes, stale: nodes.filter((n) => n.stale).map((n) => n.name) });

function collect(events: RunEvent[]) {
  const c = new ReportCollector();
  c.onEvent(redactEvent({ type: 'run-start', at: T0, runId: 'r', runbook: 'rb', context: 'lab', dryRun: false, journal: '/j' }));
  for (const e of events) c.onEvent(redactEvent(e));
  return c.report;
}
const node = (r: ReturnType<typeof collect>, name: string) => r.nodes.find((n) => n.node === name);

describe('report.json: per-node series from the readings of observers, guards and expect steps', () => {
  const r = collect(cutOffRun().slice(1));

  it('keeps the cut-off node’s Lease at renewals and staleness changes, its Ready, taint and deleted pod as changes', () => {
    expect(r.nodes.map((n) => n.node)).toEqual(['cp-1', 'node-1', 'node-2']);
    const n1 = node(r, 'node-1')!;
    expect(n1.lease.map((l) => [l.at, l.ageMs, l.stale])).toEqual([
      [iso(0), 7000, false],
      [iso(4), 1000, false],
      [iso(CUT.lastRenewal), 0, false],
      [iso(CUT.stale), 42_000, true],
      [iso(CUT.renewed + 1), 1000, false],
      [iso(84), 1000, false],
    ]);
    expect(n1.ready).toEqual([
      { at: iso(0), status: 'True' },
      { at: iso(CUT.unknown), status: 'Unknown' },
      { at: iso(CUT.ready), status: 'True' },
    ]);
    expect(n1.taints).toEqual([
      { at: iso(CUT.tainted), keys: ['node.kubernetes.io/unreachable'] },
      { at: iso(CUT.untainted), keys: [] },
    ]);
    expect(n1.deleted).toEqual([{ at: iso(CUT.deleted), pod: 'demo/web-1', cause: 'taint-eviction' }]);
    expect(n1.dropped).toBeUndefined();
  });

  it('keeps a healthy node’s renewals, one sample each, all fresh, and nothing else', () => {
    const n2 = node(r, 'node-2')!;
    expect(n2.lease.map((l) => l.at)).toEqual([0, 6, 16, 26, 36, 46, 56, 66, 76, 86].map(iso));
    expect(n2.lease.every((l) => !l.stale)).toBe(true);
    expect(n2).toMatchObject({ ready: [{ at: iso(0), status: 'True' }], taints: [], deleted: [] });
  });

  it('has a series for a node a fault targeted, even when no probe read it', () => {
    const r2 = collect([{ type: 'fault-applied', at: T0 + 1000, fault: { ...partition, node: 'node-9' } }]);
    expect(r2.nodes).toEqual([{ node: 'node-9', lease: [], ready: [], taints: [], deleted: [] }]);
  });

  it('hears a run observer over a guard on the same node, and a guard where no observer spoke', () => {
    const guard = (s: number, stale: boolean): RunEvent =>
      guardReading(nodeLeases.meta, 'leases', T0 + s * 1000, leases(s, [{ name: 'node-1', ageMs: (20 + s) * 1000, stale }]));
    const observer = (s: number): RunEvent =>
      withFacts(nodeLeases.meta, {
        type: 'observation',
        at: T0 + s * 1000,
        name: 'node leases',
        reading: leases(s, [{ name: 'node-1', ageMs: (20 + s) * 1000, stale: false }]),
      });
    const r2 = collect([guard(1, true), observer(2), guard(3, true), observer(4), guard(5, true)]);
    // the guard's 20 s threshold said stale first; once the observer (the lease's own 40 s) spoke, only it counts
    expect(node(r2, 'node-1')!.lease.map((l) => [l.at, l.stale])).toEqual([
      [iso(1), true],
      [iso(2), false],
    ]);
  });

  it('reads a taint as gone when the source that listed it no longer does, and a pod deleted once however often it is listed', () => {
    const taints = (s: number, nodes: string[]): RunEvent =>
      withFacts(noexecuteTaints.meta, {
        type: 'step-reading',
        at: T0 + s * 1000,
        index: '1',
        reading: reading(s, {
          tainted: nodes.map((n) => ({ node: n, key: 'node.kubernetes.io/not-ready', addedAt: null })),
          nodes: nodes.length,
        }),
      });
    const deletion = { pod: 'demo/a', node: 'node-2', at: T0 + 2000, how: 'terminating', cause: 'delete' };
    const deletions = (s: number): RunEvent =>
      withFacts(podDeletions.meta, {
        type: 'observation',
        at: T0 + s * 1000,
        name: 'pods deleted',
        reading: reading(s, { count: 1, deletions: [deletion] }),
      });
    const r2 = collect([taints(1, ['node-1', 'node-2']), deletions(2), taints(3, ['node-2']), deletions(4)]);
    expect(node(r2, 'node-1')!.taints).toEqual([
      { at: iso(1), keys: ['node.kubernetes.io/not-ready'] },
      { at: iso(3), keys: [] },
    ]);
    expect(node(r2, 'node-2')!.taints).toEqual([{ at: iso(1), keys: ['node.kubernetes.io/not-ready'] }]);
    expect(node(r2, 'node-2')!.deleted).toEqual([{ at: iso(2), pod: 'demo/a', cause: 'delete' }]);
  });

  it('stays bounded: renewals thinned past 120 (staleness changes kept), quiet nodes past 10 left out until something happens to them', () => {
    const events: RunEvent[] = [];
    for (let s = 0; s < 1000; s++) {
      const nodes = Array.from({ length: 30 }, (_, i) => ({ name: `n-${String(i).padStart(2, '0')}`, ageMs: 0, stale: false }));
      nodes[0] = { name: 'n-00', ageMs: s % 100 === 50 ? 45_000 : 0, stale: s % 100 === 50 };
      events.push(withFacts(nodeLeases.meta, { type: 'observation', at: T0 + s * 1000, name: 'node leases', reading: leases(s, nodes) }));
    }
    events.push(
      withFacts(noexecuteTaints.meta, {
        type: 'observation',
        at: T0 + 1_000_000,
        name: 'NoExecute taints',
        reading: reading(1000, { tainted: [{ node: 'n-25', key: 'node.kubernetes.io/unreachable', addedAt: null }], nodes: 1 }),
      }),
    );
    const r2 = collect(events);
    expect(r2.nodes.map((n) => n.node)).toEqual([...Array.from({ length: 10 }, (_, i) => `n-${String(i).padStart(2, '0')}`), 'n-25']);
    const n0 = node(r2, 'n-00')!;
    expect(n0.lease.length).toBeLessThanOrEqual(120);
    expect(n0.dropped).toBeGreaterThan(0);
    expect(n0.lease.filter((l) => l.stale).map((l) => l.at)).toEqual(Array.from({ length: 10 }, (_, k) => iso(k * 100 + 50)));
    expect(n0.lease.at(-1)!.at).toBe(iso(999));
    // a node shown late: its first and latest Lease sample, then what happened to it
    expect(node(r2, 'n-25')!.lease.map((l) => l.at)).toEqual([iso(0), iso(999)]);
    expect(node(r2, 'n-25')!.taints).toEqual([{ at: iso(1000), keys: ['node.kubernetes.io/unreachable'] }]);
    expect(JSON.stringify(r2.nodes).length).toBeLessThan(80_000);
  });

  it('shows 50 nodes at most beside the faults’ targets, and counts the others', () => {
    const tainted = Array.from({ length: 60 }, (_, i) => ({
      node: `n-${String(i).padStart(2, '0')}`,
      key: 'node.kubernetes.io/unreachable',
      addedAt: null,
    }));
    const r2 = collect([
      withFacts(noexecuteTaints.meta, {
        type: 'observation',
        at: T0 + 1000,
        name: 'NoExecute taints',
        reading: reading(1, { tainted, nodes: 60 }),
      }),
      { type: 'fault-applied', at: T0 + 2000, fault: { ...partition, node: 'n-59' } },
    ]);
    // n-59 was left out until a fault targeted it
    expect(r2.nodes).toHaveLength(51);
    expect(r2.nodes.at(-1)).toMatchObject({ node: 'n-59', taints: [{ at: iso(1), keys: ['node.kubernetes.io/unreachable'] }] });
    expect(r2.nodesLeftOut).toBe(9);
  });
});

describe('report.json: node facts come from what probes declare, never from the shape of a value', () => {
  const at = (s: number) => T0 + s * 1000;
  /** A value with every shape the report once read node facts from. */
  const lookalike = {
    nodes: [{ name: 'node-1', ageMs: 60_000, stale: true, status: 'Unknown', transitions: 1 }],
    stale: ['node-1'],
    tainted: [{ node: 'node-1', key: 'node.kubernetes.io/unreachable', addedAt: null }],
    deletions: [{ pod: 'demo/a', node: 'node-1', at: at(1), how: 'terminating', cause: 'delete' }],
    earliestEviction: { at: at(9), pod: 'demo/b', node: 'node-1' },
  };

  it('takes nothing of a probe that declares no facts, though its value looks like Leases, taints and deletions', () => {
    const r = collect([
      withFacts(http.meta, { type: 'guard-reading', at: at(1), guard: 'query', armed: true, reading: reading(1, lookalike) }),
      withFacts(http.meta, { type: 'observation', at: at(2), name: 'query', reading: reading(2, lookalike) }),
    ]);
    expect(r.nodes).toEqual([]);
    expect(r.nodeFacts).toBeUndefined();
    expect(r.guardReadings['query']![0]).not.toHaveProperty('eviction');
    expect(r.observations['query']).not.toHaveProperty('deleted');
  });

  it('keeps a Lease fact as a Lease sample', () => {
    const r = collect([withFacts(nodeLeases.meta, { type: 'step-reading', at: at(1), index: '1', reading: reading(1, lookalike) })]);
    expect(r.nodes).toEqual([{ node: 'node-1', lease: [{ at: iso(1), ageMs: 60_000, stale: true }], ready: [], taints: [], deleted: [] }]);
    expect(r.nodeFacts).toEqual(['lease']);
  });

  it('keeps a Ready fact as the Ready status', () => {
    const r = collect([withFacts(nodeReady.meta, { type: 'step-reading', at: at(1), index: '1', reading: reading(1, lookalike) })]);
    expect(r.nodes).toEqual([{ node: 'node-1', lease: [], ready: [{ at: iso(1), status: 'Unknown' }], taints: [], deleted: [] }]);
  });

  it('keeps a taints fact as the NoExecute taint keys', () => {
    const r = collect([withFacts(noexecuteTaints.meta, { type: 'step-reading', at: at(1), index: '1', reading: reading(1, lookalike) })]);
    expect(r.nodes).toEqual([
      { node: 'node-1', lease: [], ready: [], taints: [{ at: iso(1), keys: ['node.kubernetes.io/unreachable'] }], deleted: [] },
    ]);
  });

  it('keeps a deleted fact as a pod deleted, and the observer’s latest for the timeline', () => {
    const r = collect([
      withFacts(podDeletions.meta, { type: 'observation', at: at(2), name: 'pods deleted', reading: reading(2, lookalike) }),
    ]);
    expect(r.nodes).toEqual([
      { node: 'node-1', lease: [], ready: [], taints: [], deleted: [{ at: iso(1), pod: 'demo/a', cause: 'delete' }] },
    ]);
    expect((r.observations['pods deleted'] as Observation).deleted).toEqual([
      { pod: 'demo/a', node: 'node-1', at: at(1), cause: 'delete' },
    ]);
  });

  it('keeps an eviction fact with the reading it came with, and draws no node lane of it', () => {
    const r = collect([
      guardReading(evictionForecast.meta, 'forecast', at(1), reading(1, lookalike)),
      withFacts(evictionForecast.meta, { type: 'observation', at: at(2), name: 'forecast', reading: reading(2, lookalike) }),
    ]);
    const eviction = { at: iso(9), pod: 'demo/b', node: 'node-1' };
    expect(r.guardReadings['forecast']![0]!.eviction).toEqual(eviction);
    expect((r.observations['forecast'] as Observation).eviction).toEqual(eviction);
    expect((r.observations['forecast'] as Observation).history[0]!.eviction).toEqual(eviction);
    expect(r.nodes).toEqual([]);
  });
});
