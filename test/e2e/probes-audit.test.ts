import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { type CallToolResult, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { realClock } from '../../src/core/clock.js';
import { labBinaries, LAB_VERSION } from './helpers/lab.js';
import { labDown, labUp, type LabInfo } from '../../packages/lab/src/index.js';
import { controllerEvictions } from '../../packages/lab/src/lifecycle/controller-log.js';

/** `kube-runbook audit` (the built CLI) against the lab: its real flags pass; incident 3's grace fails. */
const run = promisify(execFile);
const INSTANCE = 'prb';
let lab: LabInfo;
let dir: string;

beforeAll(async () => {
  await labDown(INSTANCE);
  const binaries = await labBinaries();
  lab = await labUp({ binaries, instance: INSTANCE, nodes: 2, zones: 1 });
  dir = mkdtempSync(join(tmpdir(), 'kr-audit-'));
}, 600_000);

afterAll(async () => {
  await labDown(INSTANCE);
}, 120_000);

/** A copy of the lab's inventory with its controller settings changed (or left out: found on the cluster). */
function inventory(name: string, controller: Record<string, unknown> | undefined): string {
  const doc = parse(readFileSync(lab.inventoryFile, 'utf8')) as { spec: Record<string, unknown> };
  doc.spec.kubeconfig = lab.kubeconfig;
  if (controller) doc.spec.controller = controller;
  else delete doc.spec.controller;
  const file = join(dir, `${name}.yaml`);
  writeFileSync(file, stringify(doc));
  return file;
}

async function audit(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const env = { ...process.env, KUBE_RUNBOOK_INVENTORY: '' };
  try {
    const r = await run(process.execPath, ['bin/kube-runbook.js', 'audit', ...args], { env, timeout: 60_000 });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (e) {
    const x = e as { code?: number; stdout?: string; stderr?: string };
    return { code: x.code ?? -1, stdout: x.stdout ?? '', stderr: x.stderr ?? '' };
  }
}

describe(`kube-runbook audit on the lab (Kubernetes ${LAB_VERSION})`, () => {
  it("reads the controller-manager's settings from the cluster and passes the lab timings", async () => {
    const r = await audit('-i', inventory('from-cluster', undefined), '-o', 'json');
    expect(r.stderr).not.toMatch(/\n\s+at /);
    const out = JSON.parse(r.stdout) as {
      sources: Record<string, string>;
      settings: Record<string, number>;
      checks: { id: string; verdict: string; detail: string }[];
    };
    // /configz of the controller-manager (client-certificate credentials), else its command line on cp-1
    expect(['configz', 'manifest']).toContain(out.sources.nodeMonitorGracePeriodMs);
    expect(out.sources.nodeMonitorPeriodMs).toBe(out.sources.nodeMonitorGracePeriodMs);
    console.log(`settings found in: ${out.sources.nodeMonitorGracePeriodMs}`);
    expect(out.settings).toMatchObject({ nodeMonitorGracePeriodMs: 8000, nodeMonitorPeriodMs: 1000 });
    const verdicts = Object.fromEntries(out.checks.map((c) => [c.id, c.verdict]));
    expect(verdicts, r.stdout).toMatchObject({ 'heartbeat-grace': 'pass', 'monitor-period': 'pass', 'lease-ages': 'pass' });
    // etcd's fsync p99 is this machine's disk: a loaded one (image builds, other labs beside) can pass 100 ms, and
    // then the audit fails, exit 1, as it should
    const fsync = out.checks.find((c) => c.id === 'etcd-fsync')!;
    console.log(`etcd-fsync: ${fsync.verdict}: ${fsync.detail}`);
    expect(['pass', 'warn', 'fail']).toContain(fsync.verdict);
    expect(r.code, r.stdout).toBe(fsync.verdict === 'fail' ? 1 : 0);
  });

  it("fails incident 3's configuration: a grace period no longer than the lease renew interval", async () => {
    const r = await audit('-i', inventory('incident-3', { nodeMonitorGracePeriod: '2s', leaseDuration: '8s' }));
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/^FAIL\s+heartbeat-grace\s+node-monitor-grace-period 2s is 1× the lease renew interval 2s/m);
    expect(r.stdout).toMatch(/^verdict: FAIL/m);
  });
});

/** `kube-runbook mcp` (the built CLI over stdio, the SDK's client) on the same lab: read, forecast, and a run the user confirms. */
describe(`kube-runbook mcp on the lab (Kubernetes ${LAB_VERSION})`, () => {
  it("forecasts, audits, runs a runbook once the user said yes, halts, resumes once the user said yes, and forecasts a silent kubelet's first eviction", async () => {
    const runbook = join(dir, 'mcp-steady.yaml');
    writeFileSync(
      runbook,
      `apiVersion: kube-runbook/v1
kind: Runbook
metadata: {name: mcp-steady}
spec:
  safety: {allowContexts: [${JSON.stringify(lab.context)}], maxDuration: 5m}
  steps:
    - {name: steady state, expect: {probe: node-ready}, within: 1m}
`,
    );
    const asked: string[] = [];
    const client = new Client({ name: 'e2e', version: '1' }, { capabilities: { elicitation: { form: {} } } });
    client.setRequestHandler(ElicitRequestSchema, async (req) => {
      asked.push(req.params.message);
      return { action: 'accept', content: { confirm: true } };
    });
    const state = join(dir, 'mcp-state');
    const args = [
      'bin/kube-runbook.js',
      'mcp',
      '--runbooks',
      runbook,
      '-i',
      inventory('mcp', undefined),
      '--context',
      lab.context,
      '--allow-runs',
    ];
    const env = { ...(process.env as Record<string, string>), KUBE_RUNBOOK_INVENTORY: '', KUBE_RUNBOOK_STATE_DIR: state };
    await client.connect(new StdioClientTransport({ command: process.execPath, args, env, stderr: 'inherit' }));
    try {
      const call = async (name: string, a: Record<string, unknown> = {}) => {
        const r = (await client.callTool({ name, arguments: a }, undefined, { timeout: 120_000 })) as CallToolResult;
        return { error: r.isError === true, text: r.content.map((c) => (c.type === 'text' ? c.text : '')).join('\n') };
      };
      const forecast = await call('eviction_forecast');
      expect(forecast).toMatchObject({ error: false, text: expect.stringMatching(/^eviction forecast: ok: /) });
      const audited = await call('audit_heartbeats');
      expect(audited.text).toMatch(/"id": "heartbeat-grace",\s+"verdict": "pass"/);
      const started = await call('run_runbook', { runbook: 'mcp-steady' });
      expect(started.error, started.text).toBe(false);
      expect(asked[0]).toContain(`against context ${JSON.stringify(lab.context)}`);
      let report = await call('read_report');
      for (let i = 0; i < 120 && report.error; i++) {
        await new Promise((r) => setTimeout(r, 1000));
        report = await call('read_report');
      }
      expect(report.text).toMatch(/run \S+ of mcp-steady on context "[^"]+": passed/);
      expect(report.text).toMatch(/step 1 steady state: passed/);
      const halted = await call('halt', { reason: 'mcp drill' });
      expect(halted.text).toMatch(
        /^halted by \S+ via e2e since \S+ \(Lease kube-system\/kube-runbook-halt\): mcp drill: every run rolls back/,
      );
      expect((await call('run_runbook', { runbook: 'mcp-steady' })).text).toMatch(/^refused: halted by .*\[HALTED\]$/);
      expect(await call('resume_runs')).toMatchObject({ error: false, text: expect.stringContaining('halt cleared by') });
      expect(asked.at(-1)).toContain('Clear the halt? halted by');

      // node-1's kubelet falls silent: the forecast tool names the first eviction, and the controller makes it no
      // earlier (its own log line of the deletion, to the microsecond)
      const stoppedAt = realClock.now();
      await run('sh', [join(lab.stateDir, 'nodes', 'node-1', 'kubelet', 'stop')]);
      type Eviction = { at: number; pod: string; node: string };
      let predicted: Eviction | undefined;
      let said = '';
      for (let i = 0; i < 60 && !predicted; i++) {
        const f = await call('eviction_forecast');
        said = f.text;
        const value = JSON.parse(f.text.slice(f.text.indexOf('\n') + 1)) as { earliestEviction?: Eviction | null };
        if (value.earliestEviction?.node === 'node-1') predicted = value.earliestEviction;
        else await new Promise((r) => setTimeout(r, 1000));
      }
      expect(predicted, said).toBeDefined();
      expect(said).toMatch(/^eviction forecast: \w+: first eviction in [^:]+: \S+ on node-1/);
      let evicted: { pod: string; at: string }[] = [];
      for (let i = 0; i < 120 && evicted.length === 0; i++) {
        evicted = await controllerEvictions(lab, stoppedAt);
        if (evicted.length === 0) await new Promise((r) => setTimeout(r, 1000));
      }
      expect(evicted.length, "evictions in the controller-manager's log").toBeGreaterThan(0);
      const first = Date.parse(evicted[0]!.at);
      console.log(
        `mcp eviction_forecast: ${predicted!.pod} at ${new Date(predicted!.at).toISOString()}; the controller evicted ${evicted[0]!.pod} ${first - predicted!.at} ms later`,
      );
      expect(predicted!.at, 'the forecast is never later than the first eviction').toBeLessThanOrEqual(first);
      await run('sh', [join(lab.stateDir, 'nodes', 'node-1', 'kubelet', 'start')]);
    } finally {
      await client.close();
    }
  });
});
