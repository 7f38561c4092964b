import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { assumeYes } from '../engine/confirm.js';
import type { RunEvent } from '../engine/events.js';
import type { RunOptions, RunResult } from '../engine/run.js';
import { buildPlan } from '../engine/static-checks.js';
import { registryOf } from '../contract/registry.js';
import type { KubeAccess } from '../kube/types.js';
import type { RequestOptions } from '../kube/http.js';
import { Runbook } from '../runbook/schema.js';
import { baseRunbook, testCtx, testInventory } from '../testing/engine-harness.js';
import { FakeClock } from '../testing/fake-clock.js';
import { FakeNodes } from '../testing/fake-nodes.js';
import { JOURNAL_REF, journalCluster } from '../testing/journal-cluster.js';
import { parseInventoryLoosely } from '../testing/loose-inventory.js';
import { type SessionOptions, type SessionParts, runSession } from './session.js';

const dir = mkdtempSync(join(tmpdir(), 'kr-session-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const SECRET = 'https://kr:s3cret-pass@prom:9090';
const REPORT_CM = { namespace: 'kube-runbook', name: 'nightly-report' };

/** A cluster that records every request and every close, in `log` beside the sinks' closes. */
function recordingKube(log: string[]) {
  const requests: { path: string; method: string; contentType?: string; body?: unknown }[] = [];
  const kube = {
    contextName: 'lab',
    server: 'https://fake.invalid:6443',
    async json(path: string, r: RequestOptions = {}) {
      requests.push({ path, method: r.method ?? 'GET', contentType: r.contentType, body: r.body });
      if (r.method === 'PATCH') log.push(`PATCH ${path}`);
      return {};
    },
    close: () => log.push('kube closed'),
  } as unknown as KubeAccess;
  return { kube, requests };
}

/** The engine's run, as a fake: it emits `events`, then ends as `end` says (a result, or a throw). */
function fakeRun(events: RunEvent[], end: () => Promise<RunResult>) {
  const started: RunOptions[] = [];
  const startRun: SessionParts['startRun'] = (o) => {
    started.push(o);
    return {
      result: (async () => {
        for (const e of events) o.emit(e);
        return end();
      })(),
      interrupt: () => {},
    };
  };
  return { started, startRun };
}

const passed: RunResult = { status: 'passed', exitCode: 0, reason: `all steps passed against ${SECRET}`, remaining: [] };
const runEvents = (result: RunResult): RunEvent[] => [
  { type: 'run-start', at: 1000, runId: 'run-1', runbook: 'test', context: 'lab', dryRun: false, journal: join(dir, 'run-1.jsonl') },
  { type: 'run-end', at: 2000, status: result.status, reason: result.reason, remaining: result.remaining },
];

/** The session's options for one run against `kube`, its closes and warnings recorded in `log`. */
async function sessionOf(kube: KubeAccess, log: string[], o: Partial<SessionOptions> = {}): Promise<SessionOptions> {
  const clock = new FakeClock();
  const inventory = parseInventoryLoosely(testInventory());
  const runbook = Runbook.parse(baseRunbook({ steps: [{ wait: '1s' }] }));
  const nodes = new FakeNodes(inventory.spec.nodes, () => ({ code: 0, stdout: '', stderr: '' }));
  const plan = await buildPlan({ runbook, file: 'test.yaml', inventory, registry: registryOf([], []) });
  const ctx = testCtx({ runId: 'run-1', clock, inventory, kube, nodes });
  return {
    plan,
    ctx,
    confirmer: assumeYes,
    inventoryFile: 'inventory.yaml',
    guards: true,
    journal: { dir },
    report: {},
    view: { live: false, write: (line) => log.push(`line ${line}`) },
    warn: (line) => log.push(`warn ${line}`),
    interrupts: () => () => log.push('signals released'),
    ...o,
  };
}

/** A view and telemetry that say when they are stopped and flushed. */
const recordingSinks = (log: string[]): Partial<SessionParts> => ({
  liveView: () => ({ onEvent: () => {}, stop: async () => void log.push('view stopped') }),
  startTelemetry: () => ({ onEvent: () => {}, shutdown: async () => void log.push('telemetry flushed') }),
});

describe('runSession', () => {
  it('starts the run with the observers every run starts, and writes its report, redacted, to the ConfigMap and the files', async () => {
    const log: string[] = [];
    const { kube, requests } = recordingKube(log);
    const run = fakeRun(runEvents(passed), async () => passed);
    const reportDir = join(dir, 'report');
    const o = await sessionOf(kube, log, {
      view: { live: true },
      otel: { shownAs: 'memory' },
      report: { configMap: REPORT_CM, dir: reportDir },
    });
    const { result, report } = await runSession(o, { startRun: run.startRun, ...recordingSinks(log) });

    expect(result).toBe(passed);
    expect(run.started[0]!.observers!.map((ob) => [ob.name, ob.probe.meta.id])).toEqual([
      ['pods deleted', 'pod-deletions'],
      ['node leases', 'node-leases'],
      ['node ready', 'node-ready'],
      ['NoExecute taints', 'noexecute-taints'],
      ['eviction forecast', 'eviction-forecast'],
    ]);
    expect(report.status).toBe('passed');
    // server-side apply of report.json, redacted as every sink is
    const apply = requests.find((r) => r.method === 'PATCH')!;
    expect(apply).toMatchObject({
      path: '/api/v1/namespaces/kube-runbook/configmaps/nightly-report',
      contentType: 'application/apply-patch+yaml',
    });
    const kept = (apply.body as { data: Record<string, string> }).data['report.json']!;
    expect(JSON.parse(kept)).toMatchObject({ runId: 'run-1', status: 'passed' });
    expect(kept).not.toContain('s3cret-pass');
    const file = readFileSync(join(reportDir, 'report.json'), 'utf8');
    expect(JSON.parse(file)).toMatchObject({ runId: 'run-1', status: 'passed' });
    expect(file).not.toContain('s3cret-pass');
    expect(log).toEqual([
      'signals released',
      'view stopped',
      'telemetry flushed',
      'PATCH /api/v1/namespaces/kube-runbook/configmaps/nightly-report',
      'kube closed',
    ]);
  });

  it('a run that throws still has its view stopped, telemetry flushed and client closed, in order; no report is written', async () => {
    const log: string[] = [];
    const { kube, requests } = recordingKube(log);
    const run = fakeRun(runEvents(passed).slice(0, 1), async () => {
      throw new Error('the engine broke');
    });
    const reportDir = join(dir, 'thrown');
    const o = await sessionOf(kube, log, {
      view: { live: true },
      otel: { shownAs: 'memory' },
      report: { configMap: REPORT_CM, dir: reportDir },
    });
    await expect(runSession(o, { startRun: run.startRun, ...recordingSinks(log) })).rejects.toThrow('the engine broke');
    expect(log).toEqual(['signals released', 'view stopped', 'telemetry flushed', 'kube closed']);
    expect(requests.filter((r) => r.method === 'PATCH')).toEqual([]);
    expect(() => readFileSync(join(reportDir, 'report.json'))).toThrow(/ENOENT/);
  });

  it('a run stopped at once (a second Ctrl-C) drops what telemetry still queues', async () => {
    const log: string[] = [];
    const { kube } = recordingKube(log);
    const forced: RunResult = { ...passed, status: 'interrupted', exitCode: 130, forced: true };
    const run = fakeRun(runEvents(forced), async () => forced);
    const o = await sessionOf(kube, log, { otel: { shownAs: 'memory' } });
    await runSession(o, { startRun: run.startRun, ...recordingSinks(log) });
    expect(log.filter((l) => !l.startsWith('line '))).toEqual(['signals released', 'kube closed']);
  });

  it('a journal ConfigMap the run cannot keep its journal in refuses the run before it starts: nothing applied, no sink opened', async () => {
    const log: string[] = [];
    // the key's Secret does not exist
    const cluster = journalCluster({ configMap: {} });
    const run = fakeRun([], async () => passed);
    const o = await sessionOf(cluster.kube, log, { journal: { dir, configMap: JOURNAL_REF }, otel: { shownAs: 'memory' } });
    await expect(runSession(o, { startRun: run.startRun, ...recordingSinks(log) })).rejects.toMatchObject({ code: 'JOURNAL_KEY_MISSING' });
    expect(run.started).toEqual([]);
    expect(log).toEqual([]);
  });

  it('a journal copied to the cluster: the run gets a journal that writes there, signed', async () => {
    const log: string[] = [];
    const cluster = journalCluster({ configMap: {}, secret: {} });
    const run = fakeRun([], async () => passed);
    const o = await sessionOf(cluster.kube, log, { journal: { dir, configMap: JOURNAL_REF } });
    await runSession(o, {
      startRun: (ro) => {
        ro.journal!.append({ type: 'end', at: 1, status: 'passed' });
        return run.startRun(ro);
      },
    });
    expect(cluster.configMap['run-1.jsonl']).toContain('"status":"passed"');
    expect(cluster.configMap['run-1.hmac']).toMatch(/^[0-9a-f]{64}$/);
  });
});
