import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { type CallToolResult, ElicitRequestSchema, type ElicitResult } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { registryOf } from '../contract/registry.js';
import type { Plan } from '../engine/plan.js';
import { buildPlan } from '../engine/static-checks.js';
import { Runbook } from '../runbook/schema.js';
import { baseRunbook, testInventory } from '../testing/engine-harness.js';
import { recordingAction } from '../testing/fake-modules.js';
import { parseInventoryLoosely } from '../testing/loose-inventory.js';
import { sampleReport } from '../testing/sample-report.js';
import { tempDirEach } from '../testing/temp-dir.js';
import type { AccessLine, McpDeps, McpOptions } from './deps.js';
import { createMcpServer } from './server.js';

let dir = '';
tempDirEach('kr-mcp-', (d) => (dir = d));

const SECRET = 'Bearer abcdefghijklmnopqrstuvwxyz0123';
const RUNBOOK = '/runbooks/kubelet-partition.yaml';
const PACKAGE_DIR = resolve(import.meta.dirname, '..', '..');

/** A plan of one fault on node-1 (and, with `confirm`, a confirm step first), planned against fakes. */
async function testPlan(o: { confirm?: boolean } = {}): Promise<Plan> {
  const steps = [
    ...(o.confirm ? [{ name: 'ask', confirm: 'go on?', timeout: '1m' }] : []),
    { name: 'cut node-1', action: 'cut', with: { nodes: { names: ['node-1'] } } },
  ];
  return buildPlan({
    runbook: Runbook.parse(baseRunbook({ steps })),
    file: RUNBOOK,
    inventory: parseInventoryLoosely(testInventory()),
    registry: registryOf([recordingAction('cut', [])], []),
  });
}

/** The server's dependencies as fakes: nothing is read from a cluster, and `launch` only records what it was asked. */
function fakeDeps(
  plan: Plan,
  o: { access?: AccessLine[]; halted?: boolean } = {},
): McpDeps & { launched: string[][]; validated: string[]; halts: string[] } {
  const launched: string[][] = [];
  const validated: string[] = [];
  const halts: string[] = [];
  return {
    launched,
    validated,
    halts,
    halt: async (reason, client) => {
      halts.push(`halt ${reason} via ${client}`);
      return `halted by root@h via ${client}: ${reason} (${SECRET})`;
    },
    haltState: async () => ({ halted: o.halted === true, line: 'halted by root@h since 2026-12-02T08:00:00Z: drill' }),
    resume: async (client) => {
      halts.push(`resume via ${client}`);
      return 'resumed';
    },
    modules: async () => ({ actions: [{ id: 'cut', summary: 'cuts a node off' }], probes: [{ id: 'node-ready', summary: 'reads Ready' }] }),
    describe: async (id) => (id === 'cut' ? [{ id: 'cut', type: 'action' }] : []),
    validate: async (file) => {
      validated.push(file);
      return [{ file, ok: false, kind: 'Runbook', problems: [`${file}:3:5: spec.steps: expected an array`], warnings: [] }];
    },
    plan: async () => ({ plan, context: 'lab', access: o.access ?? [{ check: 'get nodes', by: ['cut'], allowed: true }] }),
    forecast: async () => ({ status: 'ok', at: 0, detail: `no eviction predicted (server said ${SECRET})`, value: { token: 'x' } }),
    audit: async () => ({ checks: [{ id: 'grace', verdict: 'pass', detail: 'grace 40s' }] }),
    runLock: async () => null,
    runsDir: () => join(dir, 'runs'),
    reportsDir: () => join(dir, 'mcp'),
    launch: async (args, d) => {
      launched.push(args);
      return { pid: 4242, dir: d, exited: Promise.resolve(0) };
    },
    readReport: async () => sampleReport(),
  };
}

const options = (o: Partial<McpOptions> = {}): McpOptions => ({
  runbooks: [RUNBOOK],
  inventory: '/inv/inventory.yaml',
  context: 'lab',
  allowRuns: false,
  packageDir: PACKAGE_DIR,
  ...o,
});

/** A client connected in memory; with `answer`, it declares elicitation and answers each form so (recording its message). */
async function connect(deps: McpDeps, o: McpOptions, answer?: ElicitResult) {
  const asked: string[] = [];
  const server = createMcpServer(deps, o, { now: () => new Date('2026-12-02T08:00:00Z') });
  const client = new Client({ name: 'test', version: '1' }, { capabilities: answer ? { elicitation: { form: {} } } : {} });
  if (answer)
    client.setRequestHandler(ElicitRequestSchema, async (req) => {
      asked.push(req.params.message);
      return answer;
    });
  const [c, s] = InMemoryTransport.createLinkedPair();
  await server.connect(s);
  await client.connect(c);
  const call = async (name: string, args: Record<string, unknown> = {}) =>
    (await client.callTool({ name, arguments: args })) as CallToolResult;
  return { client, call, asked };
}

const text = (r: CallToolResult) => r.content.map((c) => (c.type === 'text' ? c.text : '')).join('\n');

describe('kube-runbook mcp: read-only tools', () => {
  it('lists the read-only tools, and no tool that changes anything without --allow-runs', async () => {
    const { client, call } = await connect(fakeDeps(await testPlan()), options());
    const names = (await client.listTools()).tools.map((t) => t.name).sort();
    expect(names).toEqual([
      'audit_heartbeats',
      'describe_module',
      'eviction_forecast',
      'halt',
      'list_modules',
      'list_runbooks',
      'plan_runbook',
      'read_report',
      'run_status',
      'validate_runbook',
    ]);
    const r = await call('run_runbook', { runbook: 'kubelet-partition' });
    expect(r.isError).toBe(true);
    expect(text(r)).toMatch(/run_runbook not found/);
  });

  it('annotates every tool as clients see it: reads read-only, halt neither read-only nor destructive, changes destructive', async () => {
    const { client } = await connect(fakeDeps(await testPlan()), options({ allowRuns: true }));
    const seen = Object.fromEntries((await client.listTools()).tools.map((t) => [t.name, t.annotations]));
    const reads = { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false };
    const readsCluster = { ...reads, openWorldHint: true };
    const changes = { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true };
    // every tool there is, with --allow-runs: a tool added without its annotations fails here
    expect(seen).toEqual({
      list_modules: reads,
      describe_module: reads,
      list_runbooks: reads,
      validate_runbook: reads,
      read_report: reads,
      plan_runbook: readsCluster,
      eviction_forecast: readsCluster,
      audit_heartbeats: readsCluster,
      run_status: readsCluster,
      halt: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: true },
      resume_runs: { ...changes, idempotentHint: true },
      run_runbook: changes,
      recover_run: changes,
    });
  });

  it('validates and plans only the runbooks it was started with, by name', async () => {
    const deps = fakeDeps(await testPlan());
    const { call } = await connect(deps, options());
    const refused = await call('validate_runbook', { runbook: '/etc/passwd' });
    expect(refused.isError).toBe(true);
    expect(text(refused)).toContain('[RUNBOOK_NOT_OFFERED]');
    expect(deps.validated).toEqual([]);
    const v = await call('validate_runbook', { runbook: 'kubelet-partition' });
    expect(deps.validated).toEqual([RUNBOOK]);
    expect(text(v)).toContain(`INVALID ${RUNBOOK}\n${RUNBOOK}:3:5: spec.steps: expected an array`);
    const p = text(await call('plan_runbook', { runbook: 'kubelet-partition' }));
    expect(p).toContain('Targets: node-1');
    expect(p).toContain('RBAC: all 1 permission(s) the run needs are granted');
  });

  it('says which permissions RBAC denies the plan', async () => {
    const access = [{ check: 'patch nodes', by: ['cut'], allowed: false }];
    const { call } = await connect(fakeDeps(await testPlan(), { access }), options());
    expect(text(await call('plan_runbook', { runbook: 'kubelet-partition' }))).toContain('not allowed:\n  - patch nodes (for cut)');
  });

  it('redacts what the tools hand the model: a token in a reading, a secret-looking key', async () => {
    const { call } = await connect(fakeDeps(await testPlan()), options());
    const r = text(await call('eviction_forecast'));
    expect(r).toContain('eviction forecast: ok: no eviction predicted');
    expect(r).not.toContain('abcdefghijklmnopqrstuvwxyz0123');
    expect(r).not.toMatch(/"token": "x"/);
  });

  it('refuses an unknown module with its code, and describes a known one', async () => {
    const { call } = await connect(fakeDeps(await testPlan()), options());
    const r = await call('describe_module', { id: 'nope' });
    expect(r.isError).toBe(true);
    expect(text(r)).toContain('[UNKNOWN_MODULE]');
    expect(text(await call('describe_module', { id: 'cut' }))).toContain('"type": "action"');
  });

  it("reads a report of a run it started: summary, objectives and timeline, and as the last report's resource", async () => {
    const deps = fakeDeps(await testPlan());
    mkdirSync(join(dir, 'mcp', 'r1'), { recursive: true });
    writeFileSync(join(dir, 'mcp', 'r1', 'report.json'), '{}');
    const { call, client } = await connect(deps, options());
    const r = text(await call('read_report'));
    expect(r).toMatch(/^report r1:\nrun r-1 of kubelet-partition on context "lab"/);
    expect(r).toMatch(/Timeline:\n(.|\n)*applied block-kubelet-egress on node-1/);
    expect(text(await call('read_report', { report: 'r2' }))).toContain('[REPORT_NOT_FOUND]');
    const res = await client.readResource({ uri: 'kube-runbook://reports/last' });
    expect(res.contents[0]).toMatchObject({ text: expect.stringContaining('run r-1 of kubelet-partition') });
  });

  it('offers the shipped runbooks and schemas as resources, and its two prompts', async () => {
    const { client } = await connect(fakeDeps(await testPlan()), options());
    const uris = (await client.listResources()).resources.map((r) => r.uri);
    expect(uris).toContain('kube-runbook://runbooks/apiserver-outage.yaml');
    expect(uris).toContain('kube-runbook://runbooks/emergency/freeze-evictions.yaml');
    expect(uris).toContain('kube-runbook://schema/runbook.schema.json');
    const runbook = await client.readResource({ uri: 'kube-runbook://runbooks/apiserver-outage.yaml' });
    expect(runbook.contents[0]).toMatchObject({ text: expect.stringContaining('kind: Runbook') });
    expect((await client.listPrompts()).prompts.map((p) => p.name).sort()).toEqual(['cascade-check', 'plan-game-day']);
    const p = await client.getPrompt({ name: 'plan-game-day', arguments: { runbook: 'kubelet-partition' } });
    expect(p.messages[0]!.content).toMatchObject({ text: expect.stringContaining('"kubelet-partition"') });
  });
});

describe('kube-runbook mcp --allow-runs: a run needs the person’s yes', () => {
  const run = { runbook: 'kubelet-partition' };

  it('refuses a run when the client cannot ask its user (no elicitation capability)', async () => {
    const deps = fakeDeps(await testPlan());
    const { call } = await connect(deps, options({ allowRuns: true }));
    const r = await call('run_runbook', run);
    expect(r.isError).toBe(true);
    expect(text(r)).toMatch(/cannot ask its user for confirmation .*elicitation.*\[NOT_CONFIRMED\]/s);
    expect(deps.launched).toEqual([]);
  });

  it('refuses a run the person declines, or accepts without ticking the box', async () => {
    for (const answer of [
      { action: 'decline' },
      { action: 'cancel' },
      { action: 'accept', content: { confirm: false } },
    ] as ElicitResult[]) {
      const deps = fakeDeps(await testPlan());
      const { call, asked } = await connect(deps, options({ allowRuns: true }), answer);
      const r = await call('run_runbook', run);
      expect(r.isError).toBe(true);
      expect(text(r)).toContain('[NOT_CONFIRMED]');
      expect(asked).toHaveLength(1);
      expect(deps.launched).toEqual([]);
    }
  });

  it('runs, once the person says yes, as `kube-runbook run` on the runbook file with the server’s own flags', async () => {
    const deps = fakeDeps(await testPlan());
    const { call, asked } = await connect(deps, options({ allowRuns: true }), { action: 'accept', content: { confirm: true } });
    const r = await call('run_runbook', run);
    expect(r.isError).toBeFalsy();
    expect(asked[0]).toContain(`Run the runbook "test" (${RUNBOOK}) against context "lab"?`);
    expect(asked[0]).toContain('It applies faults to nodes: node-1.');
    expect(asked[0]).toMatch(/Blast radius: at most .*"worker":"100%".* nodes unavailable/);
    const handle = '20261202T080000Z-kubelet-partition-';
    expect(deps.launched).toHaveLength(1);
    const args = deps.launched[0]!;
    expect(args.slice(0, 8)).toEqual(['run', RUNBOOK, '--inventory', '/inv/inventory.yaml', '--context', 'lab', '--report-dir', args[7]]);
    expect(args[7]).toContain(join(dir, 'mcp', handle));
    expect(args.slice(8)).toEqual(['-o', 'json']);
    expect(args).not.toContain('--yes');
    expect(text(r)).toContain('(process 4242)');
  });

  it('refuses, before asking anyone, a run while the halt is set', async () => {
    const deps = fakeDeps(await testPlan(), { halted: true });
    const { call, asked } = await connect(deps, options({ allowRuns: true }), { action: 'accept', content: { confirm: true } });
    expect(text(await call('run_runbook', run))).toBe(
      'refused: halted by root@h since 2026-12-02T08:00:00Z: drill; no run starts until a person resumes [HALTED]',
    );
    expect(asked).toEqual([]);
    expect(deps.launched).toEqual([]);
  });

  it('refuses, before asking anyone, a run RBAC would refuse and a runbook with confirm steps', async () => {
    const denied = fakeDeps(await testPlan(), { access: [{ check: 'patch nodes', by: ['cut'], allowed: false }] });
    const a = await connect(denied, options({ allowRuns: true }), { action: 'accept', content: { confirm: true } });
    expect(text(await a.call('run_runbook', run))).toContain('[RBAC_DENIED]');
    const confirms = fakeDeps(await testPlan({ confirm: true }));
    const b = await connect(confirms, options({ allowRuns: true }), { action: 'accept', content: { confirm: true } });
    expect(text(await b.call('run_runbook', run))).toContain('[CONFIRM_STEPS]');
    expect([...a.asked, ...b.asked]).toEqual([]);
    expect([...denied.launched, ...confirms.launched]).toEqual([]);
  });

  it('recovers only a run journaled on this machine, after the person says yes', async () => {
    const deps = fakeDeps(await testPlan());
    const { call, asked } = await connect(deps, options({ allowRuns: true }), { action: 'accept', content: { confirm: true } });
    expect(text(await call('recover_run', { run: 'r-404' }))).toContain('[RUN_NOT_FOUND]');
    expect((await call('recover_run', { run: '--force' })).isError).toBe(true);
    mkdirSync(join(dir, 'runs'), { recursive: true });
    const record = { type: 'run', at: 0, runId: 'r-1', runbookName: 'kubelet-partition', context: 'lab', inventory: {}, pid: 1, host: 'h' };
    const prepared = {
      type: 'prepared',
      at: 1,
      faultId: 'f1',
      action: 'cut',
      node: 'node-1',
      step: '1',
      remediation: false,
      state: {},
      deadman: true,
    };
    writeFileSync(join(dir, 'runs', 'r-1.jsonl'), `${JSON.stringify(record)}\n${JSON.stringify(prepared)}\n`);
    const status = text(await call('run_status'));
    expect(status).toContain('"runLock": "free"');
    expect(status).toMatch(/"runId": "r-1",(.|\n)*"stillApplied": \[\s*\{\s*"action": "cut",\s*"node": "node-1"/);
    expect((await call('recover_run', { run: 'r-1' })).isError).toBeFalsy();
    expect(asked.at(-1)).toContain('It reverts 1 fault(s) it may have left applied: cut on node-1.');
    expect(deps.launched).toEqual([['recover', 'r-1', '--context', 'lab']]);
  });
});

describe('kube-runbook mcp: halt, always; resume, only with the person’s yes', () => {
  it('halts without --allow-runs and without asking, recording the client; its answer redacted', async () => {
    const deps = fakeDeps(await testPlan());
    const { call } = await connect(deps, options());
    const r = await call('halt', { reason: 'drill went wrong' });
    expect(r.isError).toBeFalsy();
    expect(deps.halts).toEqual(['halt drill went wrong via test']);
    expect(text(r)).toContain('halted by root@h via test: drill went wrong');
    expect(text(r)).not.toContain('abcdefghijklmnopqrstuvwxyz0123');
    expect((await call('resume_runs')).isError).toBe(true);
  });

  it('resumes only with --allow-runs and the person’s yes, naming the halt it clears', async () => {
    const declined = fakeDeps(await testPlan());
    const a = await connect(declined, options({ allowRuns: true }), { action: 'decline' });
    expect(text(await a.call('resume_runs'))).toContain('[NOT_CONFIRMED]');
    expect(declined.halts).toEqual([]);
    const noForm = fakeDeps(await testPlan());
    expect(text(await (await connect(noForm, options({ allowRuns: true }))).call('resume_runs'))).toContain('[NOT_CONFIRMED]');
    expect(noForm.halts).toEqual([]);
    const accepted = fakeDeps(await testPlan());
    const b = await connect(accepted, options({ allowRuns: true }), { action: 'accept', content: { confirm: true } });
    expect(text(await b.call('resume_runs'))).toBe('resumed');
    expect(b.asked[0]).toContain('Clear the halt? halted by root@h since 2026-12-02T08:00:00Z: drill');
    expect(accepted.halts).toEqual(['resume via test']);
  });
});
