import assert from 'node:assert/strict';
import { parseInventoryLoosely } from './loose-inventory.js';
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'vitest';
import { z } from 'zod';
import type { Action, RevertState } from '../contract/action.js';
import type { ActionCtx } from '../contract/context.js';
import { memoryLogger } from '../core/logger.js';
import { isKrError, KrError } from '../core/errors.js';
import type { InventoryInput } from '../inventory/schema.js';
import type { KubeAccess } from '../kube/types.js';
import { shq } from '../core/shell.js';
import { FakeClock } from './fake-clock.js';
import { FakeNodes, type ExecCall, type FakeHandler } from './fake-nodes.js';
import { RunTasks } from '../engine/tasks.js';

export type Phase = 'params' | 'preflight' | 'prepare' | 'apply' | 'revert' | 'revert-again';

/** One run of an action against fakes. */
export interface Scenario {
  name: string;
  /** The raw `with:` block (without `nodes`), parsed by the action's own schema. */
  params?: unknown;
  /** The inventory; the tester's default when absent. */
  inventory?: InventoryInput;
  /** Target node name (node-targeted actions); the inventory's first node when absent. */
  node?: string;
  /** Every node of the step (ctx.selection in preflight and apply); absent unless given. */
  selection?: string[];
  /** The fault's dead-man ttl (ctx.faultTtlMs), as a run gives it; 10 minutes when absent. */
  faultTtlMs?: number;
  /** By when the run ends at the latest (ctx.runEndsBy), as a run gives it; absent when not set. */
  runEndsBy?: number;
  /** How the nodes answer each script (exit 0, no output when absent). Scripts start with `# kube-runbook: <purpose>`. */
  handler?: FakeHandler;
  kube?: Partial<KubeAccess>;
  /** The clock the action sees (a fresh FakeClock when absent): a fake apiserver answering on a clock is handed the same. */
  clock?: FakeClock;
  runId?: string;
}

export interface LifecycleResult<S extends RevertState = RevertState> {
  params: unknown;
  prepared: S;
  applied: S;
  nodeSideRevert: string | undefined;
  nodes: FakeNodes;
  ctx: ActionCtx & { log: ReturnType<typeof memoryLogger> };
  /** Every script sent to a node, with the phase that sent it. */
  scripts: (ExecCall & { phase: Phase })[];
}

export interface ValidCase<S extends RevertState = RevertState> extends Scenario {
  check?(result: LifecycleResult<S>): void | Promise<void>;
}

export interface InvalidCase extends Scenario {
  /** The phase that must refuse, and the KrError code (or message pattern) it refuses with. */
  phase: Phase;
  code?: string;
  message?: RegExp;
}

export interface ActionTesterOptions<S extends RevertState = RevertState> {
  inventory: InventoryInput;
  valid: ValidCase<S>[];
  invalid?: InvalidCase[];
  /** A scenario with `value` put everywhere an outside value can reach a script (params, inventory, node answers). */
  hostile?: (value: string) => Scenario;
  hostileValues?: readonly string[];
  /** How sandbox stubs answer while hostile scenarios' scripts run for real. */
  stubs?: StubAnswers;
}

/** A failure of one lifecycle phase. */
class PhaseError extends Error {
  constructor(
    readonly phase: Phase,
    readonly error: unknown,
  ) {
    super(`${phase} failed: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
}

function testCtx(inventory: InventoryInput, nodes: FakeNodes, scenario: Scenario): LifecycleResult['ctx'] {
  const inv = parseInventoryLoosely(inventory);
  const nodeName = scenario.node ?? inv.spec.nodes[0]?.name;
  const node = inv.spec.nodes.find((n) => n.name === nodeName);
  const kube = scenario.kube;
  const log = memoryLogger();
  return {
    runId: scenario.runId ?? 'run-0001',
    clock: scenario.clock ?? new FakeClock(),
    log,
    tasks: new RunTasks(log),
    signal: new AbortController().signal,
    dryRun: false,
    inventory: inv,
    nodes,
    node,
    ...(scenario.selection ? { selection: scenario.selection } : {}),
    faultTtlMs: scenario.faultTtlMs ?? 600_000,
    ...(scenario.runEndsBy === undefined ? {} : { runEndsBy: scenario.runEndsBy }),
    get kube(): KubeAccess {
      if (!kube) throw new KrError('KUBE_UNAVAILABLE', 'no cluster in this test');
      return kube as KubeAccess;
    },
  };
}

/**
 * preflight → prepare → apply → revert → revert again (from the prepared state alone, as `recover` would),
 * checking on the way that the state is plain JSON and that every script parses with `sh -n`.
 */
export async function runLifecycle<S extends RevertState>(
  action: Action<z.ZodType, S>,
  inventory: InventoryInput,
  scenario: Scenario,
): Promise<LifecycleResult<S>> {
  const nodes = new FakeNodes(parseInventoryLoosely(scenario.inventory ?? inventory).spec.nodes, scenario.handler);
  const ctx = testCtx(scenario.inventory ?? inventory, nodes, scenario);
  const scripts: LifecycleResult['scripts'] = [];
  let seen = 0;
  const phase = async <T>(name: Phase, fn: () => Promise<T> | T): Promise<T> => {
    try {
      return await fn();
    } catch (e) {
      throw new PhaseError(name, e);
    } finally {
      for (const call of nodes.calls.slice(seen)) scripts.push({ ...call, phase: name });
      seen = nodes.calls.length;
    }
  };
  const params = await phase('params', () => {
    const r = action.meta.params.safeParse(scenario.params ?? {});
    if (!r.success) throw new KrError('INVALID_PARAMS', z.prettifyError(r.error));
    return r.data;
  });
  if (action.preflight) await phase('preflight', () => action.preflight!(ctx, params));
  const prepared = await phase('prepare', () => action.prepare(ctx, params));
  assertPlainJson(prepared, 'prepare');
  const nodeSideRevert = action.nodeSideRevert(structuredClone(prepared));
  // a fault on nodes is undone by its node's dead-man; a cluster one runs on no node (load-apiserver: in the executor)
  if (action.meta.kind === 'fault' && action.meta.targets === 'nodes')
    assert.ok(nodeSideRevert?.trim(), `${action.meta.id} is a fault: nodeSideRevert must give a script`);
  const applied = await phase('apply', () => action.apply(ctx, structuredClone(prepared)));
  assertPlainJson(applied, 'apply');
  await phase('revert', () => action.revert(ctx, structuredClone(applied)));
  await phase('revert-again', () => action.revert(ctx, JSON.parse(JSON.stringify(prepared)) as S));
  for (const s of [...scripts.map((x) => x.script), ...(nodeSideRevert ? [nodeSideRevert] : [])]) {
    const syntax = checkSyntax(s);
    assert.ok(syntax.ok, `a generated script does not parse with sh -n: ${syntax.error}\n${s}`);
  }
  return { params, prepared, applied, nodeSideRevert, nodes, ctx, scripts };
}

function assertPlainJson(state: unknown, what: string): void {
  assert.ok(state && typeof state === 'object' && !Array.isArray(state), `${what} must return an object`);
  assert.deepStrictEqual(JSON.parse(JSON.stringify(state)), state, `the state from ${what} must survive a JSON round trip unchanged`);
}

/** Asserts the metadata docs/actions.md is generated from. */
function checkMeta(action: Action): void {
  const m = action.meta;
  assert.match(m.id, /^[a-z][a-z0-9-]*$/);
  for (const k of ['summary', 'description', 'undo'] as const) assert.ok(m[k].trim().length > 0, `${m.id}: meta.${k} is empty`);
  if (m.targets === 'nodes') assert.ok(m.defaultNodes !== undefined, `${m.id}: node-targeted actions set meta.defaultNodes`);
  for (const layout of ['kubeadm', 'k3s', 'lab'] as const) assert.ok(m.layouts?.[layout], `${m.id}: meta.layouts.${layout} is missing`);
  assert.ok(m.params instanceof z.ZodObject, `${m.id}: params must be an object schema`);
  for (const [key, field] of Object.entries((m.params as z.ZodObject).shape)) {
    const description = (field as z.ZodType).meta()?.description;
    assert.ok(description, `${m.id}: param ${key} has no .meta({description})`);
  }
}

/** Registers the tests of one action, in the spirit of eslint's RuleTester. */
export function actionTester<S extends RevertState>(action: Action<z.ZodType, S>, options: ActionTesterOptions<S>): void {
  describe(`action ${action.meta.id}`, () => {
    it('has the metadata its docs are generated from', () => checkMeta(action));

    for (const c of options.valid)
      it(`valid: ${c.name}`, async () => {
        const result = await runLifecycle(action, options.inventory, c);
        await c.check?.(result);
      });

    for (const c of options.invalid ?? [])
      it(`invalid: ${c.name}`, async () => {
        const e = await runLifecycle(action, options.inventory, c).then(
          () => undefined,
          (x: unknown) => x,
        );
        assert.ok(e instanceof PhaseError, `expected ${c.phase} to refuse, but the whole lifecycle passed`);
        assert.equal(e.phase, c.phase, `expected ${c.phase} to refuse, but ${e.message}`);
        if (c.code) assert.equal(isKrError(e.error) ? e.error.code : undefined, c.code, e.message);
        if (c.message) assert.match(e.message, c.message);
      });

    const hostile = options.hostile;
    if (hostile)
      for (const template of options.hostileValues ?? HOSTILE_VALUES)
        it(`hostile value ${JSON.stringify(template)} reaches no shell unquoted`, async () => {
          await checkHostile(action, options, hostile, template);
        });
  });
}

/** Runs a hostile scenario and then every script it produced, for real, in a sandbox where a canary must stay absent. */
export async function checkHostile<S extends RevertState>(
  action: Action<z.ZodType, S>,
  options: Pick<ActionTesterOptions<S>, 'inventory' | 'stubs'>,
  hostile: (value: string) => Scenario,
  template: string,
): Promise<{ scripts: string[] }> {
  const sandbox = shellSandbox(options.stubs);
  try {
    const scenario = hostile(template.replaceAll('CANARY', sandbox.canary));
    let scripts: string[] = [];
    try {
      const r = await runLifecycle(action, options.inventory, scenario);
      scripts = [...r.scripts.map((s) => s.script), ...(r.nodeSideRevert ? [r.nodeSideRevert] : [])];
    } catch (e) {
      // Refusing a hostile value is a safe outcome; anything but a KrError is a bug.
      assert.ok(e instanceof PhaseError && isKrError(e.error), `a hostile value must be refused with a KrError, got ${String(e)}`);
      scripts = await collectPartial(action, options.inventory, scenario);
    }
    for (const s of scripts) {
      const r = sandbox.run(s);
      assert.ok(!r.timedOut, `a generated script did not finish in the sandbox (unbounded loop?)\n${s}`);
      assert.ok(!sandbox.canaryExists(), `a hostile value was executed by:\n${s}`);
    }
    return { scripts };
  } finally {
    sandbox.dispose();
  }
}

/** The scripts a refused lifecycle had sent before it stopped. */
async function collectPartial<S extends RevertState>(action: Action<z.ZodType, S>, inventory: InventoryInput, scenario: Scenario) {
  const nodes = new FakeNodes(parseInventoryLoosely(scenario.inventory ?? inventory).spec.nodes, scenario.handler);
  const ctx = testCtx(scenario.inventory ?? inventory, nodes, scenario);
  try {
    const params = action.meta.params.parse(scenario.params ?? {});
    await action.preflight?.(ctx, params);
    const state = await action.prepare(ctx, params);
    const nsr = action.nodeSideRevert(state);
    await action.apply(ctx, state).catch(() => undefined);
    await action.revert(ctx, state).catch(() => undefined);
    return [...nodes.calls.map((c) => c.script), ...(nsr ? [nsr] : [])];
  } catch {
    return nodes.calls.map((c) => c.script);
  }
}

// ---- running generated scripts for real, safely -------------------------------------------------------------

/** Values that execute `CANARY`-creating code if they ever reach a shell unquoted (CANARY is replaced by a path). */
export const HOSTILE_VALUES: readonly string[] = [
  '$(echo pwned >CANARY)',
  '`echo pwned >CANARY`',
  "x'; echo pwned >CANARY; '",
  'x"; echo pwned >CANARY; "',
  'x\necho pwned >CANARY\n',
  'a b;echo pwned >CANARY',
  'x && echo pwned >CANARY',
  '${IFS}$(echo${IFS}pwned>CANARY)',
];

/** Commands a generated script may call; in the sandbox each is a stub that logs its argv and exits 0 silently. */
const STUBBED = (
  'awk basename cat chmod cp crictl curl cut date dirname env findmnt flock getent grep head id ip ip6tables ' +
  'iptables iptables-save ln logger ls mkdir mktemp mount mv nft nsenter pgrep pkill readlink rm rmdir sed sleep ' +
  'sort stat sudo sync systemctl systemd-run tail tee timeout touch tr umount uniq unshare wc xargs'
).split(' ');

/** How a stub answers; with `args`, only when its arguments contain that text (the first match wins). */
export interface StubAnswer {
  args?: string;
  code?: number;
  stdout?: string;
}
export type StubAnswers = Record<string, StubAnswer | StubAnswer[]>;

function stubBody(name: string, answer: StubAnswer | StubAnswer[] = []): string {
  const list = Array.isArray(answer) ? answer : [answer];
  const reply = (a: StubAnswer) => `${a.stdout === undefined ? '' : `printf '%s\\n' ${shq(a.stdout)}; `}exit ${a.code ?? 0}`;
  const cases = list.map((a) => `  *${a.args === undefined ? '' : shq(a.args)}*) ${reply(a)} ;;`);
  return `#!${SHELL}\nprintf '%s\\n' "${name} $*" >>"$KR_STUB_LOG"\ncase "$*" in\n${cases.join('\n')}\nesac\nexit 0\n`;
}

const SHELL = ['/bin/dash', '/usr/bin/dash', '/bin/sh'].find((p) => existsSync(p)) ?? '/bin/sh';

function checkSyntax(text: string): { ok: boolean; error: string } {
  const r = spawnSync(SHELL, ['-n'], { input: text, encoding: 'utf8', timeout: 10_000 });
  return { ok: r.status === 0, error: r.stderr };
}

/**
 * A throw-away directory with a PATH of stubs only, so a script's commands do nothing but log themselves. When
 * the tests run as root, scripts run as `nobody`, so even a builtin redirection cannot change the machine.
 */
export function shellSandbox(answers: StubAnswers = {}) {
  const root = mkdtempSync(join(tmpdir(), 'kr-action-tester-'));
  const bin = join(root, 'bin');
  const work = join(root, 'work');
  mkdirSync(bin);
  mkdirSync(work);
  chmodSync(root, 0o755);
  chmodSync(work, 0o777);
  for (const name of STUBBED) writeFileSync(join(bin, name), stubBody(name, answers[name]), { mode: 0o755 });
  const canary = join(work, 'canary');
  const asNobody = process.getuid?.() === 0 ? { uid: 65534, gid: 65534 } : {};
  return {
    canary,
    canaryExists: () => existsSync(canary),
    /** The stubs called so far, one `name arg arg…` line each. */
    calls: (): string[] =>
      existsSync(join(work, 'stub.log')) ? readFileSync(join(work, 'stub.log'), 'utf8').split('\n').filter(Boolean) : [],
    run(text: string) {
      const r = spawnSync(SHELL, ['-s'], {
        input: text,
        encoding: 'utf8',
        cwd: work,
        timeout: 15_000,
        env: { PATH: bin, HOME: work, LC_ALL: 'C', KR_STUB_LOG: join(work, 'stub.log') },
        ...asNobody,
      });
      return { code: r.status, stdout: r.stdout, stderr: r.stderr, timedOut: r.error !== undefined || r.signal !== null };
    },
    dispose: () => rmSync(root, { recursive: true, force: true }),
  };
}
