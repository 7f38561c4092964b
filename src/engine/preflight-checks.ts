import { messageOf } from '../core/errors.js';
import { statusFromBody } from '../kube/http.js';
import { ApiStatusError } from '../kube/source.js';
import { describeCheck } from '../contract/access.js';
import type { InventoryNode } from '../inventory/schema.js';
import { distinctChecks, type ObserverProbe, planAccess } from './access.js';
import type { Confirmer } from './confirm.js';
import type { Ctx } from '../contract/context.js';
import type { RunEventSink } from './events.js';
import { type Plan, type PlannedAction, plannedActions } from './plan.js';
import { type EngineRetry, withRetries } from './retry.js';
import { haltCheck } from './halt-watch.js';
import type { HaltState } from '../kube/halt.js';
import { describeHolder, RUN_LOCK_NAME, runLockHolder } from './run-lock-lease.js';
import { agentTargets, type RunAgents } from './agents.js';
import { contextAllowed } from './contexts.js';
import { type StaticProblem, staticProblems } from './static-checks.js';

/**
 * How one preflight read is tried again on transient failures (a node's sshd restarting, an apiserver 503): a few
 * times within a few seconds, so a cluster or node that is really not there is still refused quickly.
 */
const PREFLIGHT_RETRY = { withinMs: 10_000, maxAttempts: 4 };

/** What the checks share: their inputs, what earlier checks found, and where verdicts go. */
export interface PreflightState {
  readonly plan: Plan;
  readonly ctx: Ctx;
  readonly confirmer: Confirmer;
  readonly observers: readonly ObserverProbe[];
  readonly agents: RunAgents | undefined;
  /** Every failure so far, as `name: detail`. */
  readonly failures: string[];
  readonly actions: PlannedAction[];
  /** Every node an action targets, each once. */
  readonly nodes: InventoryNode[];
  /** The nodes among them reached through agents. */
  readonly viaAgent: ReadonlySet<string>;
  /** Nodes not checked: reached through agents that were not started (a dry run, a run already refused). */
  skipped: ReadonlySet<string>;
  /** Whether the apiserver answered (`cluster`). */
  reachable: boolean;
  /** The permissions refused (`rbac`). */
  denied: string[];
  /** The static checks' problems of the preflight stage (`static checks`). */
  statics: StaticProblem[];
  /** Reports one verdict: a `preflight` event, and a failure unless ok. */
  verdict(name: string, ok: boolean, detail: string): void;
  /** How a read is tried again on transient failures, each failed attempt reported. */
  retry(what: string, node?: string, idempotentWrite?: boolean): EngineRetry;
}

/** One check of the preflight. */
export interface PreflightCheck {
  /** Its name: the `check` of its verdicts (the static checks and the actions' own give theirs under their names). */
  readonly name: string;
  /** What it reads, in a few words. */
  readonly reads: string;
  /** Runs it; `stop` ends the preflight (what follows would only repeat its failure). */
  run(s: PreflightState): Promise<'stop' | void> | 'stop' | void;
}

export function preflightState(o: {
  plan: Plan;
  ctx: Ctx;
  confirmer: Confirmer;
  emit: RunEventSink;
  observers: readonly ObserverProbe[];
  agents: RunAgents | undefined;
}): PreflightState {
  const { plan, ctx, emit } = o;
  const failures: string[] = [];
  const actions = plannedActions(plan);
  const nodes = [...new Map(actions.flatMap((a) => a.targets ?? []).map((n) => [n.name, n])).values()];
  const viaAgent = new Set(agentTargets(plan.inventory, nodes).map((t) => t.node.name));
  return {
    ...o,
    failures,
    actions,
    nodes,
    viaAgent,
    skipped: viaAgent,
    reachable: false,
    denied: [],
    statics: [],
    verdict(name, ok, detail) {
      emit({ type: 'preflight', at: ctx.clock.now(), check: name, ok, detail });
      if (!ok) failures.push(`${name}: ${detail}`);
    },
    retry: (what, node, idempotentWrite) => ({
      clock: ctx.clock,
      signal: ctx.signal,
      deadline: ctx.clock.now() + PREFLIGHT_RETRY.withinMs,
      maxAttempts: PREFLIGHT_RETRY.maxAttempts,
      idempotentWrite,
      record: (a) => emit({ type: 'attempt', at: ctx.clock.now(), ...a, what, ...(node === undefined ? {} : { node }) }),
    }),
  };
}

const context: PreflightCheck = {
  name: 'context',
  reads: "the kubeconfig's context and server, spec.safety.allowContexts",
  run({ plan, ctx, verdict }) {
    const name = ctx.kube.contextName;
    const allowed = contextAllowed(name, ctx.kube.server, plan.safety.allowContexts);
    verdict(
      'context',
      allowed,
      allowed
        ? `context "${name}" is allowed (server ${ctx.kube.server})`
        : `context "${name}" is not in spec.safety.allowContexts (${plan.safety.allowContexts.join(', ') || 'none listed'}); its server is ${ctx.kube.server}. ` +
            `Run against an allowed context with --context NAME, or, if this cluster is one the runbook is meant for, add "${name}" ` +
            `(or "${name}@${ctx.kube.server}", which pins its server too) to spec.safety.allowContexts in ${plan.file}`,
    );
    if (!allowed) return 'stop';
  },
};

const confirmations: PreflightCheck = {
  name: 'confirmations',
  reads: 'whether confirm steps can be answered (a terminal, or --yes)',
  run({ plan, confirmer, verdict }) {
    if (plan.confirms)
      verdict(
        'confirmations',
        confirmer.answerable,
        confirmer.answerable ? 'confirm steps can be answered' : 'the runbook asks for confirmation, but there is no terminal and no --yes',
      );
  },
};

const cluster: PreflightCheck = {
  name: 'cluster',
  reads: "the apiserver's /version",
  async run(s) {
    const { ctx } = s;
    try {
      await withRetries(
        'preflight',
        async () => {
          const v = await ctx.kube.raw('/version', { timeoutMs: 10_000, signal: ctx.signal });
          if (v.status >= 500) throw statusFromBody(v.status, v.body);
        },
        s.retry('cluster'),
      );
      s.reachable = true;
      s.verdict('cluster', true, `apiserver ${ctx.kube.server} answers`);
    } catch (e) {
      s.verdict(
        'cluster',
        false,
        e instanceof ApiStatusError
          ? `apiserver ${ctx.kube.server} answered ${e.status}`
          : `apiserver ${ctx.kube.server} does not answer: ${messageOf(e)}`,
      );
    }
  },
};

const rbac: PreflightCheck = {
  name: 'rbac',
  reads: "SelfSubjectAccessReviews of what the runbook's modules and the run lock declare (meta.access)",
  async run(s) {
    if (!s.reachable) return;
    // the same declarations (each module's meta.access, with its params) that `kube-runbook manifests` grants
    const checks = distinctChecks(planAccess(s.plan, s.observers));
    for (const { check: a, by } of checks) {
      try {
        // a SelfSubjectAccessReview stores nothing: repeating it is harmless
        if (!(await withRetries('preflight', () => s.ctx.kube.canI(a), s.retry('rbac', undefined, true))))
          s.denied.push(`${describeCheck(a)} (for ${by.join(', ')})`);
      } catch (e) {
        s.denied.push(`${describeCheck(a)} (${messageOf(e)})`);
      }
    }
    s.verdict(
      'rbac',
      s.denied.length === 0,
      s.denied.length
        ? `not allowed: ${s.denied.join('; ')}`
        : `${checks.length} permission(s) the runbook and the run lock need are granted`,
    );
  },
};

const runLock: PreflightCheck = {
  name: 'run lock',
  reads: 'the run lock Lease in spec.safety.lockNamespace',
  async run(s) {
    if (!s.reachable || s.denied.length) return;
    const { ctx } = s;
    const ns = s.plan.safety.lockNamespace;
    // read-only here (also for --dry-run): the run takes the lock right after a preflight that passed
    try {
      const holder = await withRetries(
        'preflight',
        () => runLockHolder(ctx.kube, { namespace: ns, runId: ctx.runId, now: () => ctx.clock.now() }),
        s.retry('run lock'),
      );
      s.verdict('run lock', !holder, holder ? describeHolder(ns, holder) : `no other run holds Lease ${ns}/${RUN_LOCK_NAME}`);
    } catch (e) {
      s.verdict('run lock', false, `cannot read Lease ${ns}/${RUN_LOCK_NAME}: ${messageOf(e)}`);
    }
  },
};

const halt: PreflightCheck = {
  name: 'halt',
  reads: 'the halt Lease (`kube-runbook halt`) in spec.safety.lockNamespace',
  async run(s) {
    if (!s.reachable || s.denied.length) return;
    const read = (f: () => Promise<HaltState>) => withRetries('preflight', f, s.retry('halt'));
    s.verdict('halt', ...(await haltCheck(s.ctx, s.plan.safety.lockNamespace, read)));
  },
};

const statics: PreflightCheck = {
  name: 'static checks',
  reads: 'the plan alone: the static checks of the preflight stage (validate runs them too), each under its own name',
  run(s) {
    s.statics = staticProblems(s.plan, {}, 'preflight');
    for (const name of new Set(s.statics.map((p) => p.check)))
      s.verdict(
        name,
        false,
        s.statics
          .filter((p) => p.check === name)
          .map((p) => p.message)
          .join('; '),
      );
  },
};

const agents: PreflightCheck = {
  name: 'agents',
  reads: 'the agent pods it starts on the nodes reached through agents, until each answers',
  async run(s) {
    const { viaAgent, agents: run } = s;
    // a dry run creates nothing, nor a run already refused: nodes reached through agents not started are not checked
    if (!viaAgent.size || s.statics.some((p) => p.check === 'agents')) return;
    if (!run) {
      s.verdict(
        'agents',
        true,
        `dry run: ${viaAgent.size} agent pod(s) not started; ${[...viaAgent].sort().join(', ')} and their actions' checks are left to the run`,
      );
      return;
    }
    if (s.failures.length) return s.verdict('agents', false, 'not started: the checks above failed');
    const problems = await run.start(s.ctx.signal);
    s.verdict(
      'agents',
      problems.length === 0,
      problems.length
        ? `cannot start the node agents: ${problems.join('; ')}`
        : `${run.targets.length} agent pod(s) running and answering in ${run.namespaces.join(', ')}`,
    );
    if (problems.length) return 'stop';
    s.skipped = new Set();
  },
};

const nodes: PreflightCheck = {
  name: 'nodes',
  reads: 'an echo through the transport of each node an action targets',
  async run(s) {
    const { ctx } = s;
    const nodes = s.nodes.filter((n) => !s.skipped.has(n.name));
    const unreachable: string[] = [];
    await Promise.all(
      nodes.map(async (n) => {
        try {
          const r = await withRetries(
            'preflight',
            () => ctx.nodes.exec(n.name, 'echo kube-runbook-ok', { timeoutMs: 20_000, signal: ctx.signal }),
            s.retry('nodes', n.name),
          );
          if (r.code !== 0 || !r.stdout.includes('kube-runbook-ok'))
            unreachable.push(`${n.name} (exit ${r.code}: ${r.stderr.trim().slice(0, 200)})`);
        } catch (e) {
          unreachable.push(`${n.name} (${messageOf(e)})`);
        }
      }),
    );
    if (nodes.length)
      s.verdict(
        'nodes',
        unreachable.length === 0,
        unreachable.length ? `unreachable: ${unreachable.sort().join('; ')}` : `${nodes.length} node(s) reachable`,
      );
    if (unreachable.length) return 'stop';
  },
};

const actions: PreflightCheck = {
  name: 'actions',
  reads: "each action's own preflight on each of its targets, as `action N ID`",
  async run(s) {
    for (const a of s.actions) {
      if (!a.action.preflight) continue;
      const problems: string[] = [];
      for (const node of a.targets ?? [undefined]) {
        if (node && s.skipped.has(node.name)) continue;
        try {
          const ready = a.action.preflight.bind(a.action);
          const selection = a.targets?.map((t) => t.name);
          await withRetries(
            'preflight',
            () => ready({ ...s.ctx, node, ...(selection ? { selection } : {}) }, a.params),
            s.retry(`action ${a.index} ${a.actionId}`, node?.name),
          );
        } catch (e) {
          problems.push(`${node ? `${node.name}: ` : ''}${messageOf(e)}`);
        }
      }
      s.verdict(`action ${a.index} ${a.actionId}`, problems.length === 0, problems.length ? problems.join('; ') : 'ready');
    }
  },
};

/** The checks of a preflight, in the order they run. */
export const PREFLIGHT_CHECKS: readonly PreflightCheck[] = [
  context,
  confirmations,
  cluster,
  rbac,
  runLock,
  halt,
  statics,
  agents,
  nodes,
  actions,
];
