import { afterEach, describe, expect, it } from 'vitest';
import type { InventoryNode } from '../inventory/schema.js';
import { ProbeTester } from '../testing/probe-tester.js';
import { resolveNodeSelector, selectNodes, trackNodeSelection } from './node-selection.js';
import { paths, watchSpecs } from './resources.js';
import type { NodeSummary } from './types.js';

const inv: InventoryNode[] = [
  { name: 'cp-1', roles: ['control-plane'], zone: 'a' },
  { name: 'node-2', roles: ['worker'], zone: 'b' },
  { name: 'node-1', roles: ['worker'], zone: 'a' },
] as InventoryNode[];
const cluster: NodeSummary[] = [
  { name: 'node-1', labels: { 'topology.kubernetes.io/zone': 'a', tier: 'web' } },
  { name: 'node-2', labels: { 'topology.kubernetes.io/zone': 'b' } },
  { name: 'node-9', labels: { 'node-role.kubernetes.io/control-plane': '' } },
];
const names = (ns: InventoryNode[]) => ns.map((n) => n.name);

describe('node selection for plans (inventory nodes)', () => {
  it('keywords, filters and count take nodes in name order', () => {
    expect(names(selectNodes('all', inv))).toEqual(['cp-1', 'node-1', 'node-2']);
    expect(names(selectNodes('workers', inv))).toEqual(['node-1', 'node-2']);
    expect(names(selectNodes({ role: 'worker', count: 1 }, inv))).toEqual(['node-1']);
    expect(names(selectNodes({ zone: 'a' }, inv))).toEqual(['cp-1', 'node-1']);
    expect(names(selectNodes({ percent: 50 }, inv))).toEqual(['cp-1']);
  });

  it('a label selector reads the cluster, and a node the cluster lacks never matches it', () => {
    expect(names(selectNodes({ selector: 'tier=web' }, inv, cluster))).toEqual(['node-1']);
    expect(names(selectNodes({ selector: '!tier' }, inv, cluster))).toEqual(['node-2']);
    expect(() => selectNodes({ selector: 'tier=web' }, inv)).toThrow(expect.objectContaining({ code: 'SELECTOR_NEEDS_CLUSTER' }));
  });

  it('names a node missing from the inventory, and a bad label key, as errors', () => {
    expect(() => selectNodes({ names: ['nope'] }, inv)).toThrow(expect.objectContaining({ code: 'NODE_NOT_IN_INVENTORY' }));
    expect(() => selectNodes({ selector: 'bad key=1' }, inv, cluster)).toThrow(expect.objectContaining({ code: 'LABEL_SELECTOR_INVALID' }));
  });
});

describe('node selection for probes (cluster Nodes)', () => {
  it('roles come from the inventory, else from node-role labels', () => {
    expect(resolveNodeSelector('control-plane', inv, cluster)).toEqual(['node-9']);
    expect(resolveNodeSelector('workers', inv, cluster)).toEqual(['node-1', 'node-2']);
  });

  it('a node named alone is selected even when the cluster lacks it (reported missing by the probe)', () => {
    expect(resolveNodeSelector({ names: ['node-1', 'gone'] }, inv, cluster)).toEqual(['gone', 'node-1']);
    expect(resolveNodeSelector({ names: ['node-1', 'gone'], count: 1 }, inv, cluster)).toEqual(['gone']);
    expect(resolveNodeSelector({ names: ['gone'], zone: 'a' }, inv, cluster)).toEqual([]);
  });

  it('zone is the inventory zone or the topology label; labels filter', () => {
    expect(resolveNodeSelector({ zone: 'b' }, inv, cluster)).toEqual(['node-2']);
    expect(resolveNodeSelector({ selector: 'tier in (web, api)' }, inv, cluster)).toEqual(['node-1']);
  });
});

describe('trackNodeSelection', () => {
  let t: ProbeTester | undefined;
  afterEach(async () => t?.close());

  it('follows Nodes added, deleted and relabelled, and works nothing out again on a status update', async () => {
    t = new ProbeTester();
    t.putNode('node-1', { labels: { tier: 'web' } });
    t.putNode('node-2', { labels: { tier: 'db' } });
    const nodes = t.kube.watches.watch(watchSpecs.nodes());
    await t.clock.runUntil(() => nodes.freshness().synced, 10_000, 10);
    const web = trackNodeSelection({ selector: 'tier=web' }, [], nodes);
    const first = web.names();
    expect(first).toEqual(['node-1']);
    expect([web.has('node-1'), web.has('node-2')]).toEqual([true, false]);

    t.putNode('node-1', { labels: { tier: 'web' }, heartbeat: t.clock.now() + 10_000 });
    await t.advance(10);
    expect(web.names()).toBe(first);

    t.putNode('node-2', { labels: { tier: 'web' } });
    t.putNode('node-3', { labels: { tier: 'web' } });
    await t.advance(10);
    expect(web.names()).toEqual(['node-1', 'node-2', 'node-3']);
    expect(web.has('node-3')).toBe(true);

    t.api.remove(paths.nodes, 'node-1');
    await t.advance(10);
    expect(web.names()).toEqual(['node-2', 'node-3']);
    expect(web.has('node-1')).toBe(false);
  });
});
