/**
 * The emergency runbooks against the lab's real control plane: with --yes, and in a terminal where a person answers
 * each confirmation. (The incident runbooks are in incidents.test.ts.)
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import type { RunReport } from '../../src/report/collect.js';
import { runAndMeasure, type Outcome } from '../../src/cli/demo.js';
import { REPO, cli, startLab, stopLab, until, whyRun, type LabInfo } from './helpers/lab.js';

const INSTANCE = 'rbk';
let lab: LabInfo;
const runbook = (name: string) => join(REPO, 'runbooks', name);

/** Every node Ready and every pod Running again (the Deployment replaces evicted pods). */
const settled = () =>
  until('the lab to settle', async () => (await cli(['lab', 'status', '--instance', INSTANCE])).code === 0, 180_000, 1000);

function expectSafe(o: Outcome) {
  expect(o.evicted, 'pods deleted by eviction').toEqual([]);
  expect(o.killed, 'containers killed').toEqual([]);
  expect(o.report.remaining, 'faults left applied').toEqual([]);
  expect(o.report.faults.every((f) => f.status === 'reverted')).toBe(true);
  expect(o.report.rollback?.complete).toBe(true);
}

beforeAll(async () => {
  lab = await startLab({ instance: INSTANCE, nodes: 3 });
}, 1_200_000);

afterAll(async () => {
  await stopLab(INSTANCE);
});

describe('emergency runbooks', () => {
  it('freeze-evictions runs with --yes and restores kubelets, then the controller-manager', async () => {
    const o = await runAndMeasure(lab, runbook('emergency/freeze-evictions.yaml'), true, ['--context', lab.context]);
    expect(o.exitCode, whyRun(o)).toBe(0);
    expect(o.report.steps.filter((s) => s.kind === 'confirm').every((s) => s.status === 'passed')).toBe(true);
    const cm = o.report.faults.find((f) => f.action === 'stop-controller-manager')!;
    const kubelets = o.report.faults.filter((f) => f.action === 'stop-kubelet');
    expect(kubelets.length).toBe(3);
    expect(kubelets.every((k) => k.revertedAt! < cm.revertedAt!)).toBe(true);
    expectSafe(o);
    await settled();
  });

  it('control-plane-failover asks at each dangerous step in a terminal, and "no" rolls back', async () => {
    // `script` gives the CLI a pseudo-terminal; we answer its prompts as a person would
    const transcript = await inTerminal(
      ['run', runbook('emergency/control-plane-failover.yaml'), '-i', lab.inventoryFile, '--context', lab.context],
      [
        ['Stop kube-controller-manager on the control-plane nodes', 'y'],
        ['Stop the kubelets on the worker nodes', 'y'],
        ['Bring up the new control plane', 'n'],
      ],
    );
    expect(transcript.code).toBe(1);
    expect(transcript.output).toMatch(/guard eviction forecast: [^\n]*\n[\s\S]{0,400}\? Stop kube-controller-manager/);
    expect(transcript.output).toContain('declined: Bring up the new control plane');
    expect(transcript.output).toMatch(/reverted stop-kubelet on node-1[\s\S]*reverted stop-controller-manager on cp-1/);
    expect(transcript.output).toContain('rollback complete');
    await settled();
  });
});

describe('a recovery objective set too tight', () => {
  it('fails the run with exit 5 after a full rollback, and says so in the report and JUnit', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kr-objective-'));
    const file = join(dir, 'too-tight.yaml');
    const node1 = { nodes: { names: ['node-1'] }, staleAfter: '3s' };
    writeFileSync(
      file,
      stringify({
        apiVersion: 'kube-runbook/v1',
        kind: 'Runbook',
        metadata: { name: 'objective-too-tight' },
        spec: {
          safety: { allowContexts: [lab.context], faultTtl: '2m' },
          steps: [
            { name: "stop node-1's kubelet", action: 'stop-kubelet', with: { nodes: { names: ['node-1'] } } },
            { name: 'its lease goes stale', expect: { probe: 'node-leases', with: node1, status: 'violated' }, within: '1m' },
          ],
          // its clock starts with the expect step: the Lease, still fresh then, goes stale before holdFor, and is
          // fresh again only after the rollback, long past the second it is given
          objectives: [
            {
              name: "node-1's lease fresh within a second",
              probe: 'node-leases',
              with: node1,
              from: { step: 'its lease goes stale' },
              holdFor: '10s',
              within: '1s',
            },
          ],
        },
      }),
    );
    const r = await cli(['run', file, '-i', lab.inventoryFile, '--context', lab.context, '--yes', '--report-dir', join(dir, 'report')]);
    expect(r.code, `${r.stdout}\n${r.stderr}`).toBe(5);
    const report = JSON.parse(readFileSync(join(dir, 'report', 'report.json'), 'utf8')) as RunReport;
    expect(report.status).toBe('objective-missed');
    expect(report.reason).toBe("recovery objective missed: node-1's lease fresh within a second");
    expect(report.steps.map((st) => st.status)).toEqual(['passed', 'passed']);
    expect(report.rollback?.complete).toBe(true);
    expect(report.remaining).toEqual([]);
    expect(report.objectives).toEqual([
      expect.objectContaining({
        status: 'missed',
        withinMs: 1000,
        detail: expect.stringMatching(/^node-leases not ok within 1s \(last reading /),
      }),
    ]);
    expect(readFileSync(join(dir, 'report', 'junit.xml'), 'utf8')).toMatch(
      /<testcase classname="objective-too-tight\.objectives" name="node-1&#39;s lease fresh within a second" time="0\.000"><failure message="objective missed">/,
    );
    await settled();
  });
});

/** Runs the CLI in a pseudo-terminal (util-linux `script`), answering each prompt when its text appears. */
function inTerminal(args: string[], answers: [string, string][]): Promise<{ code: number | null; output: string }> {
  const command = [process.execPath, join(REPO, 'bin', 'kube-runbook.js'), ...args].map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(' ');
  return new Promise((resolve) => {
    const child = spawn('script', ['-qfec', command, '/dev/null'], {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: { ...process.env, TERM: 'dumb' },
    });
    let output = '';
    let from = 0;
    const pending = [...answers];
    const onData = (b: Buffer) => {
      output += b.toString().replace(/\r/g, '');
      const next = pending[0];
      const at = next ? output.indexOf(next[0], from) : -1;
      if (next && at >= 0 && output.indexOf('[y/N]', at) >= 0) {
        from = output.indexOf('[y/N]', at);
        pending.shift();
        child.stdin.write(`${next[1]}\n`);
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.on('close', (code) => resolve({ code, output }));
  });
}
