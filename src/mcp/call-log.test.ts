import { readFileSync, statSync } from 'node:fs';
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
import { CallLog, type CallLogOptions, jsonLinesFile } from './call-log.js';
import type { McpDeps, McpOptions } from './deps.js';
import { createMcpServer } from './server.js';

let dir = '';
tempDirEach('kr-mcp-log-', (d) => (dir = d));

const RUNBOOK = '/runbooks/kubelet-partition.yaml';
const START = Date.UTC(2026, 11, 2, 8, 0, 0);

/** One fault on node-1, planned against fakes. */
const testPlan = (): Promise<Plan> =>
  buildPlan({
    runbook: Runbook.parse(baseRunbook({ steps: [{ name: 'cut node-1', action: 'cut', with: { nodes: { names: ['node-1'] } } }] })),
    file: RUNBOOK,
    inventory: parseInventoryLoosely(testInventory()),
    registry: registryOf([recordingAction('cut', [])], []),
  });

/** The server's dependencies as fakes: `audit` fails as a bug would, `launch` records nothing and starts nothing. */
function fakeDeps(plan: Plan, o: { halted?: boolean } = {}): McpDeps {
  const none = () => Promise.reject(new Error('not used here'));
  return {
    modules: none,
    describe: async () => [],
    validate: none,
    plan: async () => ({ plan, context: 'lab', access: [] }),
    forecast: none,
    audit: () => Promise.reject(new Error('boom')),
    runLock: async () => null,
    runsDir: () => join(dir, 'runs'),
    reportsDir: () => join(dir, 'mcp'),
    launch: async (_args, d) => ({ pid: 4242, dir: d, exited: Promise.resolve(0) }),
    readReport: async () => sampleReport(),
    halt: async (reason) => `halted: ${reason}`,
    haltState: async () => ({ halted: o.halted === true, line: o.halted ? 'halted by root@h: drill' : 'no halt is set' }),
    resume: async () => 'resumed',
  };
}

const options = (allowRuns: boolean): McpOptions => ({
  runbooks: [RUNBOOK],
  context: 'lab',
  allowRuns,
  packageDir: resolve(import.meta.dirname, '..', '..'),
});

/** A log whose clock ticks 5 ms each time it is read, its lines kept: text as on stderr, JSON as in --log FILE. */
function memoryLog(o: Partial<CallLogOptions> = {}) {
  let t = START - 5;
  const text: string[] = [];
  const json: string[] = [];
  const log = new CallLog({
    clock: { now: () => (t += 5) },
    say: (l) => text.push(l),
    file: { write: (l) => json.push(l), close: () => undefined },
    ...o,
  });
  return { log, text, json };
}

/** A client connected in memory; `answer` is how it answers forms (a function that throws: the form was never answered). */
async function connect(log: CallLog, o: { allowRuns?: boolean; halted?: boolean; answer?: ElicitResult | (() => never) } = {}) {
  const server = createMcpServer(fakeDeps(await testPlan(), o), options(o.allowRuns ?? false), {
    now: () => new Date(START),
    calls: log,
  });
  const client = new Client({ name: 'test', version: '1' }, { capabilities: o.answer ? { elicitation: { form: {} } } : {} });
  const answer = o.answer;
  if (answer) client.setRequestHandler(ElicitRequestSchema, async () => (typeof answer === 'function' ? answer() : answer));
  const [c, s] = InMemoryTransport.createLinkedPair();
  await server.connect(s);
  await client.connect(c);
  const call = async (name: string, args: Record<string, unknown> = {}) =>
    (await client.callTool({ name, arguments: args })) as CallToolResult;
  return { client, call };
}

/** The lines without their time. */
const untimed = (lines: string[]) => lines.map((l) => l.replace(/^\S+ /, ''));

describe('the MCP call log: one line per call, with what was decided where it was decided', () => {
  it('says answered, refused with the code, failed, and what the SDK refused before any tool ran', async () => {
    const { log, text, json } = memoryLog();
    const { call, client } = await connect(log);
    await call('list_runbooks');
    await call('describe_module', { id: 'nope' });
    await call('audit_heartbeats');
    await call('halt', { reason: 'drill went wrong' });
    await call('run_runbook', { runbook: 'kubelet-partition' });
    await call('validate_runbook', { runbook: 42 });
    await client.getPrompt({ name: 'plan-game-day', arguments: { runbook: 'kubelet-partition' } });
    await client.readResource({ uri: 'kube-runbook://schema/runbook.schema.json' });
    await expect(client.readResource({ uri: 'kube-runbook://reports/last' })).rejects.toThrow(/no run started by this server/);
    await expect(client.readResource({ uri: 'kube-runbook://nothing' })).rejects.toThrow(/not found/);

    expect(text[0]).toBe('2026-12-02T08:00:00.000Z mcp tool list_runbooks {} via test 1: answered (5 ms)');
    expect(untimed(text)).toEqual([
      'mcp tool list_runbooks {} via test 1: answered (5 ms)',
      'mcp tool describe_module {"id":"nope"} via test 1: refused [UNKNOWN_MODULE]: no action or probe is called "nope" (see list_modules) (5 ms)',
      'mcp tool audit_heartbeats {} via test 1: failed: unexpected error: boom (5 ms)',
      'mcp tool halt {"reason":"drill went wrong"} via test 1: halted (5 ms)',
      'mcp tool run_runbook {"runbook":"kubelet-partition"} via test 1: refused [INVALID_PARAMS]: MCP error -32602: Tool run_runbook not found (5 ms)',
      expect.stringMatching(
        /^mcp tool validate_runbook \{"runbook":42\} via test 1: refused \[INVALID_PARAMS\]: MCP error -32602: Input validation error: .*runbook.* \(5 ms\)$/,
      ),
      'mcp prompt plan-game-day {"runbook":"kubelet-partition"} via test 1: answered (5 ms)',
      'mcp resource kube-runbook://schema/runbook.schema.json via test 1: answered (5 ms)',
      `mcp resource kube-runbook://reports/last via test 1: refused [REPORT_NOT_FOUND]: no run started by this server has a report yet (under ${join(dir, 'mcp')}) (5 ms)`,
      'mcp resource kube-runbook://nothing via test 1: refused [INVALID_PARAMS]: MCP error -32602: Resource kube-runbook://nothing not found (5 ms)',
    ]);
    expect(json.map((l) => JSON.parse(l) as unknown)[1]).toEqual({
      time: '2026-12-02T08:00:00.010Z',
      type: 'tool',
      name: 'describe_module',
      arguments: { id: 'nope' },
      client: 'test 1',
      decision: 'refused',
      code: 'UNKNOWN_MODULE',
      reason: 'no action or probe is called "nope" (see list_modules)',
      durationMs: 5,
    });
    expect(json).toHaveLength(text.length);
  });

  it("says the person's answer: declined, not answered, the client cannot ask, accepted and what it launched", async () => {
    const { log, text, json } = memoryLog();
    const run = { runbook: 'kubelet-partition' };
    await (await connect(log, { allowRuns: true })).call('run_runbook', run);
    await (await connect(log, { allowRuns: true, answer: { action: 'decline' } })).call('run_runbook', run);
    const late = () => {
      throw new Error('no answer');
    };
    await (await connect(log, { allowRuns: true, answer: late })).call('resume_runs');
    await (
      await connect(log, { allowRuns: true, halted: true, answer: { action: 'accept', content: { confirm: true } } })
    ).call('run_runbook', run);
    const yes = await connect(log, { allowRuns: true, answer: { action: 'accept', content: { confirm: true } } });
    await yes.call('run_runbook', run);
    await yes.call('resume_runs');

    const lines = untimed(text);
    expect(lines[0]).toBe(
      'mcp tool run_runbook {"runbook":"kubelet-partition"} via test 1: denied: the client cannot ask [NOT_CONFIRMED]: ' +
        'refused: this MCP client cannot ask its user for confirmation (it did not declare the elicitation capability), and a change ' +
        'is never made on the model’s word alone; use a client that supports elicitation, or run it from a terminal (5 ms)',
    );
    expect(lines[1]).toBe(
      'mcp tool run_runbook {"runbook":"kubelet-partition"} via test 1: declined by the person [NOT_CONFIRMED]: refused: the user answered decline (5 ms)',
    );
    expect(lines[2]).toMatch(
      /^mcp tool resume_runs \{\} via test 1: not answered by the person \[NOT_CONFIRMED\]: refused: the confirmation could not be asked or was not answered \(.*no answer.*\) \(5 ms\)$/,
    );
    expect(lines[3]).toBe(
      'mcp tool run_runbook {"runbook":"kubelet-partition"} via test 1: refused [HALTED]: refused: halted by root@h: drill; no run starts until a person resumes (5 ms)',
    );
    expect(lines[4]).toMatch(
      /^mcp tool run_runbook \{"runbook":"kubelet-partition"\} via test 1: launched run 20261202T080000Z-kubelet-partition-[0-9a-f]{4} \(process 4242\); accepted by the person \(5 ms\)$/,
    );
    expect(lines[5]).toBe('mcp tool resume_runs {} via test 1: cleared the halt; accepted by the person (5 ms)');
    expect(JSON.parse(json[1]!)).toMatchObject({
      decision: 'declined by the person',
      code: 'NOT_CONFIRMED',
      consent: 'declined by the person',
    });
    expect(JSON.parse(json[4]!)).toMatchObject({
      decision: expect.stringMatching(/^launched run 20261202T080000Z-kubelet-partition-/),
      consent: 'accepted by the person',
    });
  });

  it('never writes a secret an argument carries: a token-looking value, a key named token', async () => {
    const { log, text, json } = memoryLog();
    const { call } = await connect(log);
    const r = await call('halt', {
      reason: 'drill; the apiserver said Bearer abcdefghijklmnopqrstuvwxyz0123',
      token: 'hunter2-the-token',
      nested: { password: 'pw-0123456789' },
    });
    expect(r.isError).toBeFalsy();
    for (const line of [...text, ...json]) {
      expect(line).not.toContain('abcdefghijklmnopqrstuvwxyz0123');
      expect(line).not.toContain('hunter2');
      expect(line).not.toContain('pw-0123456789');
    }
    expect(JSON.parse(json[0]!)).toMatchObject({
      arguments: { reason: 'drill; the apiserver said Bearer [redacted]', token: '[redacted]', nested: { password: '[redacted]' } },
    });
  });
});

describe('the MCP call log, at its limits', () => {
  it('cuts arguments longer than 4,000 characters of JSON, after redacting them', async () => {
    const { log, text, json } = memoryLog();
    const { call } = await connect(log);
    await call('no_such_tool', { token: 'hunter2-the-token', blob: 'x'.repeat(10_000) });
    const cut =
      /^\S+ mcp tool no_such_tool "\{\\"token\\":\\"\[redacted\]\\",\\"blob\\":\\"x+… \((\d+) characters, cut\)" via test 1: refused \[INVALID_PARAMS\]/;
    expect(text[0]).toMatch(cut);
    expect(Number(cut.exec(text[0]!)![1])).toBe(JSON.stringify({ token: '[redacted]', blob: 'x'.repeat(10_000) }).length);
    expect(text[0]!.length).toBeLessThan(4_400);
    expect(JSON.parse(json[0]!)).toMatchObject({
      arguments: expect.stringMatching(/^\{"token":"\[redacted\]","blob":"x+… \(\d+ characters, cut\)$/),
    });
    expect(json[0]).not.toContain('hunter2');
  });

  it('keeps a call to one line whatever the client names: a line break, a terminal escape, a long name', async () => {
    const { log, text, json } = memoryLog();
    const { call } = await connect(log);
    const forged = 'x\n2026-12-02T08:00:00.000Z mcp tool run_runbook {} via test 1: answered (5 ms)\u001b[2K';
    await call(forged);
    await call('y'.repeat(5_000));
    expect(text).toHaveLength(2);
    expect(text[0]).toMatch(
      /^\S+ mcp tool x\\u000a2026-12-02T08:00:00\.000Z mcp tool run_runbook \{\} via test 1: answered \(5 ms\)\\u001b\[2K \{\} via test 1: refused \[INVALID_PARAMS\]: MCP error -32602: Tool x; 2026/,
    );
    expect(text.join('')).not.toMatch(/\p{Cc}/u);
    expect(text[1]).toMatch(/^\S+ mcp tool y{200}… \(5000 characters, cut\) \{\} via test 1: refused \[INVALID_PARAMS\]/);
    expect((JSON.parse(json[0]!) as { name: string }).name).toBe(forged);
  });

  it('answers a call whose line cannot be written, and says so', async () => {
    const said: string[] = [];
    const broken = new CallLog({
      clock: { now: () => START },
      say: (l) => said.push(l),
      file: {
        write: () => {
          throw new Error('disk full');
        },
        close: () => undefined,
      },
    });
    const { call } = await connect(broken);
    expect((await call('list_runbooks')).isError).toBeFalsy();
    expect(said.at(-1)).toBe('kube-runbook: warning: an MCP call of tool list_runbooks could not be logged: disk full');
  });
});

describe('--log FILE', () => {
  it('appends one JSON line per call to a file only its owner reads, and names a file it cannot open', async () => {
    const file = join(dir, 'calls.jsonl');
    for (const name of ['list_runbooks', 'run_status']) {
      const out = jsonLinesFile(file, () => undefined);
      const { call } = await connect(memoryLog({ file: out }).log);
      await call(name);
      out.close();
    }
    const lines = readFileSync(file, 'utf8').trimEnd().split('\n');
    expect(lines.map((l) => (JSON.parse(l) as { name: string }).name)).toEqual(['list_runbooks', 'run_status']);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(() => jsonLinesFile(join(dir, 'no', 'such', 'dir', 'calls.jsonl'), () => undefined)).toThrow(
      expect.objectContaining({ code: 'MCP_LOG_FILE', exit: 2, message: expect.stringContaining('cannot open it for appending') }),
    );
  });
});
