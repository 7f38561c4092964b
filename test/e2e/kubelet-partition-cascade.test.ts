/**
 * kubelet-partition without its guards on the default release, on real nodes: the controller evicts the cut-off
 * node's pods and its real kubelet kills their containers when it reconnects, as the node's containerd shows
 * (container ids and start times before and after the run), with every eviction marked on the timeline with its
 * cause. (With its guards, on every release: incidents.test.ts.)
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runAndMeasure } from '../../src/cli/demo.js';
import { LAB_VERSION, REAL_NODES, REPO, cli, startLab, stopLab, until, workerNodes, type LabInfo } from './helpers/lab.js';

const INSTANCE = 'kpc';
let lab: LabInfo;
const runbook = (name: string) => join(REPO, 'runbooks', name);
const settled = () =>
  until('the lab to settle', async () => (await cli(['lab', 'status', '--instance', INSTANCE])).code === 0, 180_000, 1000);
const timeline = (reportDir: string) => readFileSync(join(reportDir, 'timeline.html'), 'utf8');

beforeAll(async () => {
  lab = await startLab({ instance: INSTANCE, ...workerNodes(3) });
}, 1_200_000);

afterAll(async () => {
  await stopLab(INSTANCE);
});

describe(`kubelet-partition (Kubernetes ${LAB_VERSION})`, () => {
  it("without guards: the controller evicts the cut-off node's pods and the kubelet kills them on reconnect", async () => {
    const o = await runAndMeasure(lab, runbook('kubelet-partition.yaml'), false);
    expect(o.evicted.length).toBeGreaterThan(0);
    expect(o.killedFrom).toMatch(REAL_NODES ? /^containerd of rnode-1, rnode-2, rnode-3 / : /^the kubelet simulator's kill log/);
    expect(o.killed.length).toBeGreaterThan(0);
    // containerd stopped exactly the evicted pods' containers, on the cut-off node, and restarted none of them in place
    expect(new Set(o.killed.map((k) => k.pod))).toEqual(new Set(o.evicted.map((e) => e.pod)));
    expect(new Set(o.killed.map((k) => k.node))).toEqual(new Set(o.evicted.map((e) => e.node)));
    expect(o.restarted).toBe(0);
    // the forecast is never late: its prediction is at or before the real first eviction
    expect(o.predicted).toBeDefined();
    expect(Date.parse(o.predicted!.at)).toBeLessThanOrEqual(Date.parse(o.evicted.map((e) => e.at).sort()[0]!));
    // the timeline marks every eviction with its cause
    for (const e of o.evicted) expect(timeline(o.reportDir)).toContain(`${e.pod} on ${e.node} deleted (taint-eviction)`);
    await settled();
  });
});
