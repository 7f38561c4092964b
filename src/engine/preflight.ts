import { messageOf } from '../core/errors.js';
import { statusFromBody } from '../kube/http.js';
import { ApiStatusError } from '../kube/source.js';
import { describeCheck } from '../contract/access.js';
import { distinctChecks, type ObserverProbe, planAccess } from './access.js';
import type { Confirmer } from './confirm.js';
import type { Ctx } from '../contract/context.js';
import type { RunEventSink } from './events.js';
import { type Plan, plannedActions } from './plan.js';
import { type EngineRetry, withRetries } from './retry.js';
import { describeHolder, RUN_LOCK_NAME, runLockHolder } from '../kube/run-lock.js';
import { haltCheck } from './halt-watch.js';
import { agentTargets, type RunAgents } from './agents.js';
import { contextAllowed } from './contexts.js';
import { staticProblems } from './static-checks.js';

/**
 * How one preflight read is tried again on transient failures (a node's sshd restarting, an apiserver 503): a few
 * times within a few seconds, so a cluster or node that is really not there is still refused quickly.
 */
const PREFLIGHT_RETRY = { withinMs: 10_000, maxAttempts: 4 };

export interface PreflightResult {
  ok: boolean;
  failures: string[];
}

/**
 * Everything checked before anything is touched: the context is allowed, RBAC suffices, the nodes the plan acts on
 * answer through their transport, each action's own preflight passes on each target, and confirm steps can be
 * answered. All checks run; all failures are reported. Reads failing for a transient reason are tried again for up
 * to PREFLIGHT_RETRY each, every failed attempt reported (not journaled: a refused run leaves no journal).
 */
export async function preflight(
  plan: Plan,
  ctx: Ctx,
  confirmer: Confirmer,
  emit: RunEventSink,
  observers: readonly ObserverProbe[] = [],
  /** The run's agents, started here once RBAC and the run lock are checked (a dry run starts none). */
  agents?: RunAgents,
): Promise<PreflightResult> {
  const failures: string[] = [];
  const check = (name: string, ok: boolean, detail: string) => {
    emit({ type: 'preflight', at: ctx.clock.now(), check: name, ok, detail });
    if (!ok) failures.push(`${name}: ${detail}`);
  };

  const context = ctx.kube.contextName;
  const allowed = contextAllowed(context, ctx.kube.server, plan.safety.allowContexts);
  check(
    'context',
    allowed,
    allowed
      ? `context "${context}" is allowed (server ${ctx.kube.server})`
      : `context "${context}" is not in spec.safety.allowContexts (${plan.safety.allowContexts.join(', ') || 'none listed'}); its server is ${ctx.kube.server}. ` +
          `Run against an allowed context with --context NAME, or, if this cluster is one the runbook is meant for, add "${context}" ` +
          `(or "${context}@${ctx.kube.server}", which pins its server too) to spec.safety.allowContexts in ${plan.file}`,
  );
  if (!allowed) return { ok: false, failures };

  if (plan.confirms)
    check(
      'confirmations',
      confirmer.answerable,
      confirmer.answerable ? 'confirm steps can be answered' : 'the runbook asks for confirmation, but there is no terminal and no --yes',
    );

  const retry = (what: string, node?: string, idempotentWrite?: boolean): EngineRetry => ({
    clock: ctx.clock,
    signal: ctx.signal,
    deadline: ctx.clock.now() + PREFLIGHT_RETRY.withinMs,
    maxAttempts: PREFLIGHT_RETRY.maxAttempts,
    idempotentWrite,
    record: (a) => emit({ type: 'attempt', at: ctx.clock.now(), ...a, what, ...(node === undefined ? {} : { node }) }),
  });

  let reachable: boolean;
  try {
    await withRetries(
      'preflight',
      async () => {
        const v = await ctx.kube.raw('/version', { timeoutMs: 10_000, signal: ctx.signal });
        if (v.status >= 500) throw statusFromBody(v.status, v.body);
      },
      retry('cluster'),
    );
    reachable = true;
    check('cluster', true, `apiserver ${ctx.kube.server} answers`);
  } catch (e) {
    reachable = false;
    check(
      'cluster',
      false,
      e instanceof ApiStatusError
        ? `apiserver ${ctx.kube.server} answered ${e.status}`
        : `apiserver ${ctx.kube.server} does not answer: ${messageOf(e)}`,
    );
  }
  // the same declarations (each module's meta.access, with its params) that `kube-runbook manifests` grants
  const checks = reachable ? distinctChecks(planAccess(plan, observers)) : [];
  const denied: string[] = [];
  const ns = plan.safety.lockNamespace;
  for (const { check: a, by } of checks) {
    try {
      // a SelfSubjectAccessReview stores nothing: repeating it is harmless
      if (!(await withRetries('preflight', () => ctx.kube.canI(a), retry('rbac', undefined, true))))
        denied.push(`${describeCheck(a)} (for ${by.join(', ')})`);
    } catch (e) {
      denied.push(`${describeCheck(a)} (${messageOf(e)})`);
    }
  }
  if (reachable)
    check(
      'rbac',
      denied.length === 0,
      denied.length ? `not allowed: ${denied.join('; ')}` : `${checks.length} permission(s) the runbook and the run lock need are granted`,
    );
  if (reachable && !denied.length) {
    // read-only here (also for --dry-run): the run takes the lock right after a preflight that passed
    try {
      const holder = await withRetries(
        'preflight',
        () => runLockHolder(ctx.kube, { namespace: ns, runId: ctx.runId, now: () => ctx.clock.now() }),
        retry('run lock'),
      );
      check('run lock', !holder, holder ? describeHolder(ns, holder) : `no other run holds Lease ${ns}/${RUN_LOCK_NAME}`);
    } catch (e) {
      check('run lock', false, `cannot read Lease ${ns}/${RUN_LOCK_NAME}: ${messageOf(e)}`);
    }
    check('halt', ...(await haltCheck(ctx, ns, (f) => withRetries('preflight', f, retry('halt')))));
  }

  const actions = plannedActions(plan);
  const allNodes = [...new Map(actions.flatMap((a) => a.targets ?? []).map((n) => [n.name, n])).values()];
  const viaAgent = new Set(agentTargets(plan.inventory, allNodes).map((t) => t.node.name));
  // a dry run creates nothing, nor a run already refused: nodes reached through agents not started are not checked
  let skipped = viaAgent;
  // the static checks of the preflight stage (validate runs them too): each one's problems under its name
  const statics = staticProblems(plan, {}, 'preflight');
  for (const name of new Set(statics.map((p) => p.check)))
    check(
      name,
      false,
      statics
        .filter((p) => p.check === name)
        .map((p) => p.message)
        .join('; '),
    );
  const outage = statics.filter((p) => p.check === 'agents');
  if (viaAgent.size && !outage.length) {
    if (!agents)
      check(
        'agents',
        true,
        `dry run: ${viaAgent.size} agent pod(s) not started; ${[...viaAgent].sort().join(', ')} and their actions' checks are left to the run`,
      );
    else if (failures.length) check('agents', false, 'not started: the checks above failed');
    else {
      const problems = await agents.start(ctx.signal);
      check(
        'agents',
        problems.length === 0,
        problems.length
          ? `cannot start the node agents: ${problems.join('; ')}`
          : `${agents.targets.length} agent pod(s) running and answering in ${agents.namespaces.join(', ')}`,
      );
      if (problems.length) return { ok: false, failures };
      skipped = new Set();
    }
  }
  const nodes = allNodes.filter((n) => !skipped.has(n.name));
  const unreachable: string[] = [];
  await Promise.all(
    nodes.map(async (n) => {
      try {
        const r = await withRetries(
          'preflight',
          () => ctx.nodes.exec(n.name, 'echo kube-runbook-ok', { timeoutMs: 20_000, signal: ctx.signal }),
          retry('nodes', n.name),
        );
        if (r.code !== 0 || !r.stdout.includes('kube-runbook-ok'))
          unreachable.push(`${n.name} (exit ${r.code}: ${r.stderr.trim().slice(0, 200)})`);
      } catch (e) {
        unreachable.push(`${n.name} (${messageOf(e)})`);
      }
    }),
  );
  if (nodes.length)
    check(
      'nodes',
      unreachable.length === 0,
      unreachable.length ? `unreachable: ${unreachable.sort().join('; ')}` : `${nodes.length} node(s) reachable`,
    );
  if (unreachable.length) return { ok: false, failures };

  for (const a of actions) {
    if (!a.action.preflight) continue;
    const problems: string[] = [];
    for (const node of a.targets ?? [undefined]) {
      if (node && skipped.has(node.name)) continue;
      try {
        const ready = a.action.preflight.bind(a.action);
        const selection = a.targets?.map((t) => t.name);
        await withRetries(
          'preflight',
          () => ready({ ...ctx, node, ...(selection ? { selection } : {}) }, a.params),
          retry(`action ${a.index} ${a.actionId}`, node?.name),
        );
      } catch (e) {
        problems.push(`${node ? `${node.name}: ` : ''}${messageOf(e)}`);
      }
    }
    check(`action ${a.index} ${a.actionId}`, problems.length === 0, problems.length ? problems.join('; ') : 'ready');
  }
  return { ok: failures.length === 0, failures };
}
