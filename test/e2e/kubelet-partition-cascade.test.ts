/**
 * kubelet-partition without its guards on the default release: the controller evicts the cut-off node's pods and
 * the kubelet kills them when it reconnects, with every eviction marked on the timeline with its cause. (With its
 * guards, on every release: incidents.test.ts.)
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runAndMeasure } from '../../src/cli/demo.js';
import { LAB_VERSION, REPO, cli, startLab, stopLab, until, type LabInfo } from './helpers/lab.js';

const INSTANCE = 'kpc';
let lab: LabInfo;
const runbook = (name: string) => join(REPO, 'runbooks', name);
const settled = () => until('the lab to settle', async () => (await cli(['lab', 'status', '--instance', INSTANCE])).code === 0, 180_000, 1000);
const timeline = (reportDir: string) => readFileSync(join(reportDir, 'timeline.html'), 'utf8');

beforeAll(async () => {
  lab = await startLab({ instance: INSTANCE, nodes: 3 });
}, 1_200_000);

afterAll(async () => {
  await stopLab(INSTANCE);
});

describe(`kubelet-partition (Kubernetes ${LAB_VERSION})`, () => {
  it('without guards: the controller evicts the cut-off node\'s pods and the kubelet kills them on reconnect', async () => {
    const o = await runAndMeasure(lab, runbook('kubelet-partition.yaml'), false);
    expect(o.evicted.length).toBeGreaterThan(0);
    expect(o.killed.length).toBeGreaterThan(0);
    // the forecast is never late: its prediction is at or before the real first eviction
    expect(o.predicted).toBeDefined();
    expect(Date.parse(o.predicted!.at)).toBeLessThanOrEqual(Date.parse(o.evicted.map((e) => e.at).sort()[0]!));
    // the timeline marks every eviction with its cause
    for (const e of o.evicted) expect(timeline(o.reportDir)).toContain(`${e.pod} on ${e.node} deleted (taint-eviction)`);
    await settled();
  });
});
