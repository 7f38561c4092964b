import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NodeFact } from '../src/contract/node-facts.js';
import { readingNumbers } from '../src/contract/reading-numbers.js';
import type { Probe, Reading } from '../src/contract/probe.js';
import { paths } from '../src/kube/resources.js';
import { probes } from '../src/probes/index.js';
import { iso, ProbeTester } from '../src/testing/probe-tester.js';

/**
 * Node facts parity: every probe whose readings name nodes declares the node facts the run report draws of them
 * (`meta.nodeFacts`), or says here why it has none to give; the report reads nothing else of a reading's value. The
 * same for the numbers it charts (`meta.numbers`): every probe whose values hold numbers declares them, or says why not. Each
 * probe that watches the cluster reads the same troubled cluster: node-1 stops renewing its Lease, goes Ready Unknown,
 * gets the unreachable NoExecute taint and loses a pod.
 */

/** `with:` for the probes that need some. */
const PARAMS: Record<string, Record<string, unknown>> = {
  'kubernetes-object': { apiVersion: 'v1', kind: 'Pod', namespace: 'default', condition: "object.spec.nodeName != ''" },
  'workload-availability': { kind: 'Deployment', namespace: 'default' },
};

/** Probes whose readings name nodes but tell no state of a node the report draws per node, and why. */
const NO_FACTS: Record<string, string> = {
  'lease-renewal': 'it names the nodes latest to renew per pool (five at most): how late, not the state of each node',
};

/** Probes whose values hold numbers at their top level that the report charts no curve of, and why. */
const NO_NUMBERS: Record<string, string> = {
  'controller-manager': 'renewals and transitions of the leader Lease: counts that only grow, told in its detail',
  'eviction-forecast': 'nodes at risk, failing and healthy: the node lanes and the eviction mark draw them node by node',
  'node-ready': 'nodes Ready and not: the node lanes draw each one',
  'noexecute-taints': 'tainted nodes: the node lanes draw each one',
  'pod-deletions': 'pods deleted: the report lists each one',
};

/** Probes that watch no cluster objects (they read endpoints or run commands): not run here. */
const watchesCluster = (p: Probe) => p.meta.access.some((a) => 'resource' in a && a.verbs.includes('watch'));

/** Every string in a value that is a node's name. */
function namedNodes(value: unknown, names: ReadonlySet<string>, out = new Set<string>()): Set<string> {
  if (typeof value === 'string' && names.has(value)) out.add(value);
  else if (Array.isArray(value)) for (const v of value) namedNodes(v, names, out);
  else if (typeof value === 'object' && value !== null) for (const v of Object.values(value)) namedNodes(v, names, out);
  return out;
}

describe('node facts parity', () => {
  const t = new ProbeTester();
  const read = new Map<string, Reading[]>();
  const all: Probe[] = [];

  beforeAll(async () => {
    for (const id of Object.keys(probes)) all.push(await probes[id]!());
    // discovery of the core group, for kubernetes-object
    const core = JSON.stringify({ resources: [{ name: 'pods', kind: 'Pod', namespaced: true }] });
    t.kube.rawHandler = (path) => (path === '/api/v1' ? { status: 200, body: core } : { status: 404, body: 'not found' });
    for (const n of ['node-1', 'node-2', 'node-3']) {
      t.putNode(n, { labels: { 'topology.kubernetes.io/zone': n === 'node-3' ? 'zone-b' : 'zone-a' } });
      t.renewLease(n);
      t.putPod('default', `web-${n}`, { node: n });
      t.putPod('default', `db-${n}`, { node: n });
    }
    const runs = all.filter(watchesCluster).map((p) => [p.meta.id, t.start(p, PARAMS[p.meta.id] ?? {})] as const);
    // node-2 and node-3 renew every 2 s; node-1 has stopped
    const renew = () => {
      for (const n of ['node-2', 'node-3']) t.renewLease(n);
      t.clock.setTimer(2000, renew);
    };
    t.clock.setTimer(2000, renew);
    await t.advance(9_000);
    t.api.update(paths.nodes, 'node-1', (n) => {
      Object.assign((n.status as { conditions: Record<string, string>[] }).conditions[0]!, {
        status: 'Unknown',
        lastTransitionTime: iso(t.clock.now()),
      });
      (n.spec as { taints: unknown[] }).taints.push({
        key: 'node.kubernetes.io/unreachable',
        effect: 'NoExecute',
        timeAdded: iso(t.clock.now()),
      });
    });
    await t.advance(2_000);
    t.terminatePod('default', 'db-node-1');
    await t.advance(2_000);
    for (const [id, run] of runs) read.set(id, [...run.readings]);
  }, 60_000);
  afterAll(async () => t.close());

  it('runs every probe that watches the cluster, and each reads something', () => {
    expect([...read.keys()]).toEqual(all.filter(watchesCluster).map((p) => p.meta.id));
    for (const [id, readings] of read)
      expect(
        readings.some((r) => r.value !== null),
        `${id} read no value`,
      ).toBe(true);
  });

  it('lists only probes that exist and name nodes in NO_FACTS', () => {
    for (const id of Object.keys(NO_FACTS)) {
      expect(read.has(id), `NO_FACTS names ${id}, which is not run here`).toBe(true);
      expect(all.find((p) => p.meta.id === id)!.meta.nodeFacts, `${id} declares node facts: take it out of NO_FACTS`).toBeUndefined();
    }
  });

  for (const id of Object.keys(probes)) {
    it(`${id}: declares the numbers of its values (meta.numbers) or says in NO_NUMBERS why not; each reading gives some`, () => {
      const readings = (read.get(id) ?? []).filter((r) => r.value !== null);
      const meta = all.find((p) => p.meta.id === id)!.meta;
      const counts = readings.flatMap((r) => Object.entries(r.value as object).flatMap(([k, v]) => (typeof v === 'number' ? [k] : [])));
      if (NO_NUMBERS[id]) expect(meta.numbers, `${id} declares numbers: take it out of NO_NUMBERS`).toBeUndefined();
      else if (!meta.numbers) expect(counts, `${id} reads numbers: declare meta.numbers, or say in NO_NUMBERS why not`).toEqual([]);
      for (const r of meta.numbers ? readings : []) expect(Object.keys(readingNumbers(meta.numbers, r.value)!).length).toBeGreaterThan(0);
    });

    it(`${id}: declares node facts when its readings name nodes, and gives each kind it declares`, () => {
      const readings = read.get(id);
      if (!readings) return;
      const meta = all.find((p) => p.meta.id === id)!.meta;
      const names = new Set(t.inventory.spec.nodes.map((n) => n.name));
      const named = new Set(readings.flatMap((r) => [...namedNodes(r.value, names)]));
      if (!meta.nodeFacts) {
        if (named.size && !NO_FACTS[id])
          expect.fail(
            `the readings of ${id} name ${[...named].join(', ')}: declare meta.nodeFacts in src/probes/${id}.ts, or say in NO_FACTS why it has none`,
          );
        return;
      }
      const facts: NodeFact[] = readings.flatMap((r) => (r.value === null ? [] : meta.nodeFacts!.of(r.value)));
      for (const f of facts) {
        expect(meta.nodeFacts.kinds, `${id} gives a ${f.kind} fact it does not declare`).toContain(f.kind);
        expect([...named], `${id} gives a fact of a node its values do not name`).toContain(f.node);
      }
      for (const kind of meta.nodeFacts.kinds)
        expect(
          facts.some((f) => f.kind === kind && f.node === 'node-1'),
          `${id} declares ${kind} facts but gave none of node-1`,
        ).toBe(true);
    });
  }
});
