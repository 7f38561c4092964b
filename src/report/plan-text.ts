import type { z } from 'zod';
import type { Plan, PlannedAction, PlannedStep } from '../engine/plan.js';
import { agentsDuringOutage, undoneThroughAgents } from '../engine/agents.js';
import { formatDuration } from '../core/duration.js';
import { durationsAsText } from '../core/zod-helpers.js';
import { rollbackOrder } from './plan-rollback.js';

/** A module's parameters on one line, durations as a runbook writes them. */
const params = (p: Record<string, unknown>, module: { meta: { params: z.ZodType } }): string => {
  const entries = Object.entries(durationsAsText(module.meta.params, p) as Record<string, unknown>).filter(([, v]) => v !== undefined);
  if (!entries.length) return '';
  const text = entries.map(([k, v]) => `${k}: ${typeof v === 'string' ? v : JSON.stringify(v)}`).join(', ');
  return ` {${text.length > 100 ? `${text.slice(0, 99)}…` : text}}`;
};

const on = (a: PlannedAction): string =>
  a.targets ? ` on ${a.targets.map((t) => t.name).join(', ') || '(no node matches)'}` : ' (cluster)';

/** Which of an action and its `orElse` the plan took, and why. */
const choice = (a: PlannedAction, indent: string): string =>
  a.substituted
    ? `\n${indent}(${a.substituted})`
    : a.orElse
      ? `\n${indent}(or ${a.orElse}, where the server is too old for ${a.actionId}: decided at run time)`
      : '';

/** How a fault on nodes reached through agents is undone, as a line under it. */
const undo = (plan: Plan, a: PlannedAction, indent: string): string => {
  const how = undoneThroughAgents(plan, a);
  return how ? `\n${indent}${how}` : '';
};

function stepLine(s: PlannedStep, plan: Plan): string[] {
  switch (s.kind) {
    case 'action':
      return [
        `${s.index}. ${s.name} — ${s.actionId}${on(s)}${params(s.params, s.action)}${s.action.describe ? `\n       ${s.action.describe(s.params)}` : ''}${choice(s, '       ')}${undo(plan, s, '       ')}`,
      ];
    case 'expect':
      return [
        `${s.index}. ${s.name} — expect ${s.probeId}${params(s.params, s.probe)} to read ${s.status} within ${formatDuration(s.withinMs)}`,
      ];
    case 'wait':
      return [s.name === `wait ${formatDuration(s.ms)}` ? `${s.index}. ${s.name}` : `${s.index}. ${s.name} — wait ${formatDuration(s.ms)}`];
    case 'confirm':
      return [`${s.index}. ${s.name} — ask "${s.message}" (timeout ${formatDuration(s.timeoutMs)}, then ${s.onTimeout})`];
    case 'revert':
      return [`${s.index}. ${s.name} — revert step ${s.target.index} (${s.target.actionId}${on(s.target)}) now`];
    case 'parallel':
      return [`${s.index}. ${s.name} — in parallel:`, ...s.children.flatMap((c) => stepLine(c, plan).map((l) => `   ${l}`))];
  }
}

/** The rollback order as lines. */
function rollbackLines(plan: Plan): string[] {
  return rollbackOrder(plan).map((e) => {
    if (e.kind === 'wait')
      return `wait until ${e.waitFor.probeId}${params(e.waitFor.params, e.waitFor.probe)} reads ok (at most ${formatDuration(e.withinMs)}; else what follows stays applied)`;
    const a = e.action;
    if (e.kind === 'undo-remediation') return `undo remediation ${a.index} if it was applied: ${a.actionId}${on(a)}`;
    return `revert step ${a.index}: ${a.actionId}${on(a)}${e.unlessRevertedEarly ? ' (if the revert step did not already)' : ''}`;
  });
}

export function renderPlan(plan: Plan, context?: string): string {
  const rb = plan.runbook;
  const out: string[] = [];
  out.push(`Runbook ${rb.metadata.name} (${plan.file})${rb.metadata.description ? `\n  ${rb.metadata.description.trim()}` : ''}`);
  out.push(
    `Inventory ${plan.inventory.metadata.name}: layout ${plan.inventory.spec.layout}, ${plan.inventory.spec.nodes.length} nodes (${plan.inventory.spec.nodes.map((n) => n.name).join(', ')})`,
  );
  out.push(
    `Safety: contexts ${plan.safety.allowContexts.join(', ') || '(none allowed)'}${context ? ` — current context "${context}"` : ''}; ` +
      `max duration ${formatDuration(plan.safety.maxDuration)}; node-side dead-man after ${formatDuration(plan.safety.faultTtl)} without keepalive`,
  );
  out.push('', 'Guards (react to every reading from the first fault to the end of rollback):');
  if (!plan.guards.length) out.push('  (none)');
  for (const g of plan.guards)
    out.push(
      `  - ${g.name}: ${g.probeId}${params(g.params, g.probe)}; violated → ${g.onViolation}; unknown → ${g.onUnknown}${g.onUnknown === 'hold' ? ` (abort after ${formatDuration(g.unknownForMs)})` : ''}`,
    );
  out.push('', 'Steps:');
  for (const s of plan.steps) out.push(...stepLine(s, plan).map((l) => `  ${l}`));
  for (const w of agentsDuringOutage(plan)) out.push(`  warning: ${w} (preflight refuses this)`);
  out.push('', 'Remediation (applied once, when a guard says remediate):');
  if (!plan.remediation.length) out.push('  (none)');
  for (const r of plan.remediation)
    out.push(`  ${r.index}. ${r.actionId}${on(r)}${params(r.params, r.action)}${choice(r, '      ')}${undo(plan, r, '      ')}`);
  out.push('', 'Rollback (always: on success, failure, abort, Ctrl-C, SIGTERM and SIGHUP):');
  const order = rollbackLines(plan);
  if (!order.length) out.push('  (nothing to revert: the runbook only observes)');
  order.forEach((l, i) => out.push(`  ${i + 1}. ${l}`));
  if (plan.objectives.length) {
    out.push('', 'Recovery objectives (measured after the rollback; a missed one ends the run with exit 5):');
    for (const o of plan.objectives)
      out.push(
        `  - ${o.name}: from ${clockStart(o.from)} until ${o.probeId}${params(o.params, o.probe)} ` +
          `reads ok and stays ok for ${formatDuration(o.holdForMs)}; objective ${formatDuration(o.withinMs)}`,
      );
  }
  return `${out.join('\n')}\n`;
}

/** What starts an objective's clock, as plan says it. */
function clockStart(from: Plan['objectives'][number]['from']): string {
  if (from === 'revert') return 'the last fault reverted';
  if ('step' in from) return `the start of step "${from.step}"`;
  return `the last of step "${from.revertOf}"'s faults reverted`;
}
