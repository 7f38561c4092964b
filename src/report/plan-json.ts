import { resolveAccess } from '../contract/access.js';
import type { Plan, PlannedAction, PlannedExpect, PlannedStep, PlannedWait } from '../engine/plan.js';
import { agentsDuringOutage, undoneThroughAgents } from '../engine/agents.js';
import type { SensitiveGrant } from '../engine/sensitive-access.js';
import { rollbackOrder } from './plan-rollback.js';
import { PLAN_VERSION, type PlanJson } from './plan-schema.js';

type Step = PlanJson['steps'][number];
const names = (a: PlannedAction) => a.targets?.map((t) => t.name) ?? null;

/** An action step's or remediation's fields: what it applies where, how it is chosen and undone, what it may do. */
function action(plan: Plan, a: PlannedAction) {
  return {
    index: a.index,
    name: a.name,
    action: a.actionId,
    params: a.params,
    targets: names(a),
    describe: a.action.describe?.(a.params) ?? null,
    orElse: a.orElse ?? null,
    substituted: a.substituted ?? null,
    undoneThroughAgents: undoneThroughAgents(plan, a) ?? null,
    access: resolveAccess(a.action.meta.access, a.params).map((x) => ({ ...x, verbs: [...x.verbs] })),
  };
}

function leaf(plan: Plan, s: PlannedAction | PlannedExpect | PlannedWait): Extract<Step, { kind: 'action' | 'expect' | 'wait' }> {
  if (s.kind === 'action') return { kind: 'action', ...action(plan, s), revertLast: s.revertLast, timeoutMs: s.timeoutMs };
  if (s.kind === 'expect')
    return { kind: 'expect', index: s.index, name: s.name, probe: s.probeId, params: s.params, status: s.status, withinMs: s.withinMs };
  return { kind: 'wait', index: s.index, name: s.name, ms: s.ms };
}

function step(plan: Plan, s: PlannedStep): Step {
  switch (s.kind) {
    case 'confirm':
      return { kind: 'confirm', index: s.index, name: s.name, message: s.message, timeoutMs: s.timeoutMs, onTimeout: s.onTimeout };
    case 'revert':
      return {
        kind: 'revert',
        index: s.index,
        name: s.name,
        target: { index: s.target.index, action: s.target.actionId, targets: names(s.target) },
      };
    case 'parallel':
      return { kind: 'parallel', index: s.index, name: s.name, children: s.children.map((c) => leaf(plan, c)) };
    default:
      return leaf(plan, s);
  }
}

/** `plan -o json`: every section of the text plan (src/report/plan-text.ts), as data; its shape is schema/plan.schema.json. */
export function planJson(plan: Plan, o: { context: string | null; offline: boolean; sensitive: readonly SensitiveGrant[] }): PlanJson {
  const { safety } = plan;
  return {
    planVersion: PLAN_VERSION,
    runbook: plan.runbook.metadata.name,
    file: plan.file,
    description: plan.runbook.metadata.description?.trim() ?? null,
    inventory: {
      name: plan.inventory.metadata.name,
      layout: plan.inventory.spec.layout,
      nodes: plan.inventory.spec.nodes.map((n) => n.name),
    },
    context: o.context,
    offline: o.offline,
    safety: {
      allowContexts: safety.allowContexts,
      maxDurationMs: safety.maxDuration,
      faultTtlMs: safety.faultTtl,
      remediationTtlMs: safety.remediationTtl,
      lockNamespace: safety.lockNamespace,
      maxUnavailable: safety.maxUnavailable,
    },
    guards: plan.guards.map((g) => ({
      name: g.name,
      probe: g.probeId,
      params: g.params,
      onViolation: g.onViolation,
      onUnknown: g.onUnknown,
      unknownForMs: g.unknownForMs,
    })),
    steps: plan.steps.map((s) => step(plan, s)),
    warnings: agentsDuringOutage(plan),
    remediation: plan.remediation.map((r) => action(plan, r)),
    rollback: {
      order: rollbackOrder(plan).map((e) => {
        if (e.kind === 'wait') return { kind: 'wait', probe: e.waitFor.probeId, params: e.waitFor.params, withinMs: e.withinMs };
        if (e.kind === 'undo-remediation')
          return { kind: 'undo-remediation', index: e.action.index, action: e.action.actionId, targets: names(e.action) };
        return {
          kind: 'revert',
          step: e.action.index,
          action: e.action.actionId,
          targets: names(e.action),
          unlessRevertedEarly: e.unlessRevertedEarly,
        };
      }),
    },
    objectives: plan.objectives.map((x) => ({
      name: x.name,
      probe: x.probeId,
      params: x.params,
      from: x.from,
      holdForMs: x.holdForMs,
      withinMs: x.withinMs,
    })),
    sensitiveGrants: o.sensitive.map((g) => ({ grant: g.grant, why: g.why })),
  };
}
