/**
 * The emergency runbooks against the lab's real control plane: with --yes, and in a terminal where a person answers
 * each confirmation (the incident runbooks are in incidents.test.ts); a recovery objective set too tight, its run
 * exported to the lab's OTLP receiver (`lab up --otel`) as one trace and its metrics, with a secret redacted.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import type { RunReport } from '../../src/report/collect.js';
import { runAndMeasure, type Outcome } from '../../packages/lab/src/cli/demo.js';
import { freePort } from '../../packages/lab/src/lifecycle/otel.js';
import { expectObjectivesMet } from './helpers/objectives.js';
import { REPO, cli, leftovers, startLab, stopLab, until, whyRun, type LabInfo, labCli } from './helpers/lab.js';

const INSTANCE = 'rbk';
let lab: LabInfo;
const runbook = (name: string) => join(REPO, 'runbooks', name);

/** Every node Ready and every pod Running again (the Deployment replaces evicted pods). */
const settled = () => until('the lab to settle', async () => (await labCli(['status', '--instance', INSTANCE])).code === 0, 180_000, 1000);

function expectSafe(o: Outcome) {
  expect(o.evicted, 'pods deleted by eviction').toEqual([]);
  expect(o.killed, 'containers killed').toEqual([]);
  expect(o.report.remaining, 'faults left applied').toEqual([]);
  expect(o.report.faults.every((f) => f.status === 'reverted')).toBe(true);
  expect(o.report.rollback?.complete).toBe(true);
}

beforeAll(async () => {
  lab = await startLab({ instance: INSTANCE, nodes: 3, otel: true });
}, 1_200_000);

afterAll(async () => {
  await stopLab(INSTANCE);
  // the OTLP receiver goes with the rest
  expect(await leftovers(INSTANCE)).toEqual([]);
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
    expectObjectivesMet(o.report, 'freeze-evictions', [
      'a controller-manager leads again',
      'every node Ready',
      'every Deployment available',
    ]);
    await settled();
  });

  it('control-plane-failover asks at each dangerous step in a terminal, and "no" rolls back', async () => {
    // `script` gives the CLI a pseudo-terminal; we answer its prompts as a person would
    const reportDir = mkdtempSync(join(tmpdir(), 'kr-failover-'));
    const transcript = await inTerminal(
      [
        'run',
        runbook('emergency/control-plane-failover.yaml'),
        '-i',
        lab.inventoryFile,
        '--context',
        lab.context,
        '--report-dir',
        reportDir,
      ],
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
    // declined, and still measured: the cluster recovers from what the run did
    const report = JSON.parse(readFileSync(join(reportDir, 'report.json'), 'utf8')) as RunReport;
    expectObjectivesMet(report, 'control-plane-failover', [
      'a controller-manager leads again',
      'every node Ready',
      'every Deployment available',
    ]);
    await settled();
  });
});

describe('a recovery objective set too tight', () => {
  it('fails the run with exit 5 after a full rollback, says so in the report and JUnit, and exports the run as one trace, secrets redacted', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kr-objective-'));
    const file = join(dir, 'too-tight.yaml');
    const node1 = { nodes: { names: ['node-1'] }, staleAfter: '3s' };
    // a Prometheus with a password in its URL that does not answer: its error carries the URL into the objective's
    // detail, and from there to the console, the report and the trace
    const host = new URL(lab.otel!.endpoint).hostname;
    const secret = 's3cret-lab-pass';
    const prometheus = `http://kr:${secret}@${host}:${await freePort(host)}`;
    writeFileSync(
      file,
      stringify({
        apiVersion: 'kube-runbook/v1',
        kind: 'Runbook',
        metadata: { name: 'objective-too-tight' },
        spec: {
          safety: { allowContexts: [lab.context], faultTtl: '2m' },
          // it fires when node-1's Lease goes stale, and only warns: the run goes on
          guards: [{ name: 'node-1 lease', probe: 'node-leases', with: node1, onViolation: 'warn' }],
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
            {
              name: 'prometheus answers within a second',
              probe: 'promql',
              with: { url: prometheus, query: 'up', comparator: { op: '>', value: 0 }, interval: '1s', timeout: '1s' },
              from: { step: 'its lease goes stale' },
              holdFor: '1s',
              within: '1s',
            },
          ],
        },
      }),
    );
    // the receiver as `lab env` gives it
    const env = (await labCli(['env', '--instance', INSTANCE])).stdout;
    expect(env).toContain(`export OTEL_EXPORTER_OTLP_ENDPOINT=${lab.otel!.endpoint}`);
    const r = await cli(['run', file, '-i', lab.inventoryFile, '--context', lab.context, '--yes', '--report-dir', join(dir, 'report')], {
      env: { ...process.env, OTEL_EXPORTER_OTLP_ENDPOINT: lab.otel!.endpoint },
    });
    expect(r.code, `${r.stdout}\n${r.stderr}`).toBe(5);
    expect(r.stderr).not.toContain('telemetry');
    const report = JSON.parse(readFileSync(join(dir, 'report', 'report.json'), 'utf8')) as RunReport;
    expect(report.status).toBe('objective-missed');
    expect(report.reason).toBe("recovery objectives missed: node-1's lease fresh within a second, prometheus answers within a second");
    expect(report.steps.map((st) => st.status)).toEqual(['passed', 'passed']);
    expect(report.rollback?.complete).toBe(true);
    expect(report.remaining).toEqual([]);
    expect(report.objectives).toEqual([
      expect.objectContaining({
        status: 'missed',
        withinMs: 1000,
        detail: expect.stringMatching(/^node-leases not ok within 1s \(last reading /),
      }),
      expect.objectContaining({
        status: 'missed',
        detail: expect.stringContaining(`promql not ok within 1s (last reading unknown: cannot query http://kr:[redacted]@${host}:`),
      }),
    ]);
    // the secret reached none of what the run wrote
    for (const written of [r.stdout, r.stderr, JSON.stringify(report), readFileSync(join(dir, 'report', 'junit.xml'), 'utf8')])
      expect(written).not.toContain(secret);
    expect(r.stdout).toContain('cannot query http://kr:[redacted]@');
    expect(readFileSync(join(dir, 'report', 'junit.xml'), 'utf8')).toMatch(
      /<testcase classname="objective-too-tight\.objectives" name="node-1&#39;s lease fresh within a second" time="0\.000"><failure message="objective missed">/,
    );

    // what the collector wrote: one trace, the run's span tree, the objective's metric
    let received: Received = { spans: [], metrics: [], text: '' };
    await until(
      'the collector to write the run',
      () => {
        received = collected(lab.otel!.file);
        return received.metrics.some((m) => m.name === 'kube_runbook.objective.recovery') && received.spans.some((sp) => !sp.parentSpanId);
      },
      15_000,
    );
    const { spans, metrics, text } = received;
    expect(new Set(spans.map((sp) => sp.traceId)).size).toBe(1);
    const roots = spans.filter((sp) => !sp.parentSpanId);
    expect(roots.map((sp) => sp.name)).toEqual(['run objective-too-tight']);
    const root = roots[0]!;
    expect(attrs(root.attributes)).toMatchObject({
      'kube_runbook.run.id': report.runId,
      'kube_runbook.runbook': 'objective-too-tight',
      'kube_runbook.context': lab.context,
      'kube_runbook.cluster': new URL(lab.apiserverUrl).host,
      'kube_runbook.nodes': expect.arrayContaining(['cp-1', 'node-1', 'node-2', 'node-3']),
      'kube_runbook.status': 'objective-missed',
    });
    const byId = new Map(spans.map((sp) => [sp.spanId, sp]));
    const tree = spans
      .filter((sp) => sp.parentSpanId)
      .map((sp) => `${byId.get(sp.parentSpanId!)?.name ?? '?'} > ${sp.name} ${String(attrs(sp.attributes)['k8s.node.name'] ?? '')}`.trim());
    expect(tree.sort()).toEqual(
      [
        "run objective-too-tight > step stop node-1's kubelet",
        'run objective-too-tight > step its lease goes stale',
        "step stop node-1's kubelet > apply stop-kubelet node-1",
        'run objective-too-tight > rollback',
        'rollback > revert stop-kubelet node-1',
      ].sort(),
    );
    const fired = root.events.filter((ev) => ev.name === 'guard fired').map((ev) => attrs(ev.attributes));
    expect(fired).toContainEqual(
      expect.objectContaining({
        'kube_runbook.guard': 'node-1 lease',
        'kube_runbook.guard.response': 'warn',
        'kube_runbook.reading.status': 'violated',
      }),
    );
    expect(root.events.map((ev) => ev.name)).toContain('objective missed');
    // the collector received the Prometheus URL redacted, never its password
    const missed = root.events.filter((ev) => ev.name === 'objective missed').map((ev) => attrs(ev.attributes));
    expect(missed).toContainEqual(
      expect.objectContaining({
        'kube_runbook.objective': 'prometheus answers within a second',
        'kube_runbook.detail': expect.stringContaining(`cannot query http://kr:[redacted]@${host}:`),
      }),
    );
    expect(text).not.toContain(secret);
    const recovery = metrics.find((m) => m.name === 'kube_runbook.objective.recovery')!;
    expect(recovery.histogram!.dataPoints.map((dp) => attrs(dp.attributes))).toContainEqual(
      expect.objectContaining({
        'kube_runbook.objective': "node-1's lease fresh within a second",
        'kube_runbook.objective.result': 'missed',
      }),
    );
    expect(metrics.map((m) => m.name)).toEqual(expect.arrayContaining(['kube_runbook.faults.applied', 'kube_runbook.faults.reverted']));
    // nothing of the kubeconfig's credentials
    const kubeconfig = readFileSync(lab.kubeconfig, 'utf8');
    const keyData = /client-key-data: (\S+)/.exec(kubeconfig)?.[1] ?? '';
    expect(keyData.length).toBeGreaterThan(100);
    expect(text).not.toContain(keyData.slice(0, 64));
    expect(text).not.toContain(Buffer.from(keyData, 'base64').toString('utf8').split('\n')[1]!);
    expect(text).not.toMatch(/PRIVATE KEY|BEGIN CERTIFICATE|Bearer /);
    await settled();
  });

  it('a receiver that is down costs one warning line, and the run ends as it would without export', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kr-otel-down-'));
    const file = join(dir, 'pause.yaml');
    writeFileSync(
      file,
      stringify({
        apiVersion: 'kube-runbook/v1',
        kind: 'Runbook',
        metadata: { name: 'otel-down' },
        spec: { safety: { allowContexts: [lab.context] }, steps: [{ name: 'pause', wait: '1s' }] },
      }),
    );
    const before = collected(lab.otel!.file).spans.length;
    // a port of the lab's address nothing listens on; the flag wins over the environment's (the lab's receiver)
    const host = new URL(lab.otel!.endpoint).hostname;
    const closed = `http://${host}:${await freePort(host)}`;
    const args = ['run', file, '-i', lab.inventoryFile, '--context', lab.context, '--yes'];
    const without = await cli(args);
    const down = await cli([...args, '--otel-endpoint', closed], {
      env: { ...process.env, OTEL_EXPORTER_OTLP_ENDPOINT: lab.otel!.endpoint },
    });
    expect(without.code, without.stderr).toBe(0);
    expect(down.code, down.stderr).toBe(without.code);
    const warnings = down.stderr.split('\n').filter((l) => l.includes('telemetry'));
    expect(warnings).toEqual([
      expect.stringMatching(new RegExp(`^kube-runbook: warning: the run's telemetry .*could not be sent to ${closed}`)),
    ]);
    expect(collected(lab.otel!.file).spans.length).toBe(before);
  });
});

interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  boolValue?: boolean;
  arrayValue?: { values?: OtlpValue[] };
}
type OtlpAttributes = { key: string; value: OtlpValue }[] | undefined;
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  attributes?: OtlpAttributes;
  events?: { name: string; attributes?: OtlpAttributes }[];
}
interface OtlpMetric {
  name: string;
  histogram?: { dataPoints: { attributes?: OtlpAttributes }[] };
}
interface Received {
  spans: (OtlpSpan & { events: NonNullable<OtlpSpan['events']> })[];
  metrics: OtlpMetric[];
  text: string;
}

const plain = (v: OtlpValue): unknown =>
  v.arrayValue ? (v.arrayValue.values ?? []).map(plain) : (v.stringValue ?? (v.intValue === undefined ? v.boolValue : Number(v.intValue)));
const attrs = (list: OtlpAttributes) => Object.fromEntries((list ?? []).map((a) => [a.key, plain(a.value)]));

/** The collector's file exporter output: a JSON line per request it received (OTLP JSON). */
function collected(file: string): Received {
  let text = '';
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return { spans: [], metrics: [], text };
  }
  // the collector may be writing its last line as it is read: only lines it has ended count
  const lines = text
    .split('\n')
    .slice(0, -1)
    .filter((l) => l.trim());
  const parsed = lines.map(
    (l) =>
      JSON.parse(l) as {
        resourceSpans?: { scopeSpans?: { spans?: OtlpSpan[] }[] }[];
        resourceMetrics?: { scopeMetrics?: { metrics?: OtlpMetric[] }[] }[];
      },
  );
  return {
    spans: parsed.flatMap((p) =>
      (p.resourceSpans ?? []).flatMap((rs) =>
        (rs.scopeSpans ?? []).flatMap((ss) => (ss.spans ?? []).map((sp) => ({ ...sp, events: sp.events ?? [] }))),
      ),
    ),
    metrics: parsed.flatMap((p) => (p.resourceMetrics ?? []).flatMap((rm) => (rm.scopeMetrics ?? []).flatMap((sm) => sm.metrics ?? []))),
    text,
  };
}

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
