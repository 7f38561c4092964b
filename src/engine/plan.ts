import type { Action } from '../contract/action.js';
import { EXIT, isKrError, KrError, quote } from '../core/errors.js';
import type { Inventory, InventoryNode } from '../inventory/schema.js';
import type { NodeSummary } from '../kube/types.js';
import type { Probe } from '../contract/probe.js';
import { formatDuration } from '../core/duration.js';
import type { Fallback, Runbook, Step, StepObjective } from '../runbook/schema.js';
import { atLeast, type KubeVersion } from '../kube/versions.js';
import type { NodeSelector } from '../runbook/selectors.js';
import type { Registry } from '../contract/registry.js';
import { selectNodes } from '../kube/node-selection.js';
import { targetsNodes } from '../runbook/catalog.js';
import { type DocPath, pathText } from '../document/problems.js';

export interface PlannedAction {
  kind: 'action';
  index: string;
  name: string;
  actionId: string;
  action: Action;
  params: Record<string, unknown>;
  /** Nodes it is applied on, or null for a cluster-wide action. */
  targets: InventoryNode[] | null;
  selector?: NodeSelector;
  /** Where the step is in the runbook (`orElse` appended when it is used), for problems at FILE:LINE:COL. */
  at: DocPath;
  /** Whether the runbook gives `with.nodes` (else the action's default selector is used). */
  nodesGiven: boolean;
  /** A label selector left unresolved: the plan was drafted without the cluster's Nodes (validate). */
  unresolved?: true;
  timeoutMs: number;
  /** Reverted with the remediations (after rollback.waitFor), not with the faults. */
  revertLast: boolean;
  /** Why the runbook's `orElse` is used instead of the action it names (the server is too old for that one). */
  substituted?: string;
  /** The `orElse` still to choose from: the plan was made without knowing the server's version. */
  orElse?: string;
  /** The step's own recovery objectives, as the runbook gives them (planned with the run's: Plan.objectives). */
  objectives?: StepObjective[];
}
export interface PlannedExpect {
  kind: 'expect';
  index: string;
  name: string;
  probeId: string;
  probe: Probe;
  params: Record<string, unknown>;
  status: 'ok' | 'violated';
  withinMs: number;
}
export interface PlannedWait {
  kind: 'wait';
  index: string;
  name: string;
  ms: number;
}
export interface PlannedConfirm {
  kind: 'confirm';
  index: string;
  name: string;
  message: string;
  timeoutMs: number;
  onTimeout: 'rollback' | 'continue';
}
export interface PlannedRevert {
  kind: 'revert';
  index: string;
  name: string;
  /** The action step whose faults are reverted. */
  target: PlannedAction;
}
export interface PlannedParallel {
  kind: 'parallel';
  index: string;
  name: string;
  children: (PlannedAction | PlannedExpect | PlannedWait)[];
}
export type PlannedStep = PlannedAction | PlannedExpect | PlannedWait | PlannedConfirm | PlannedRevert | PlannedParallel;

export interface PlannedGuard {
  name: string;
  probeId: string;
  probe: Probe;
  params: Record<string, unknown>;
  onViolation: 'abort' | 'remediate' | 'warn';
  onUnknown: 'hold' | 'abort' | 'ignore';
  unknownForMs: number;
}

/** A recovery objective with its probe (src/engine/objectives.ts measures it). */
export interface PlannedObjective {
  name: string;
  probeId: string;
  probe: Probe;
  params: Record<string, unknown>;
  /**
   * `revert`: when the run's last fault is reverted; `step`: when the named step starts; `revertOf`: when the last of
   * that action step's faults is reverted (`label` is the faults' step, as FaultRef.step says it).
   */
  from: 'revert' | { step: string } | { revertOf: string; label: string };
  holdForMs: number;
  withinMs: number;
}

export interface Plan {
  runbook: Runbook;
  file: string;
  inventory: Inventory;
  steps: PlannedStep[];
  guards: PlannedGuard[];
  remediation: PlannedAction[];
  objectives: PlannedObjective[];
  rollback: { waitFor?: { probeId: string; probe: Probe; params: Record<string, unknown> }; withinMs: number };
  safety: Runbook['spec']['safety'];
  /** Whether any step asks for confirmation. */
  confirms: boolean;
}

export interface PlanInput {
  runbook: Runbook;
  file: string;
  inventory: Inventory;
  registry: Registry;
  /** The cluster's nodes, for label selectors; absent when the cluster is not reachable. */
  clusterNodes?: NodeSummary[];
  /** The server's version, to choose between an action and its `orElse`; absent when it is not known. */
  serverVersion?: KubeVersion;
  /** Label selectors without the cluster's Nodes are left unresolved (no targets) rather than refused (validate). */
  labelsUnknown?: 'unresolved';
}

const DEFAULT_CONFIRM_TIMEOUT = 5 * 60_000;

/**
 * Turns a validated runbook and an inventory into concrete steps on concrete nodes, without the static checks
 * (buildPlan in static-checks.ts adds them): node names missing from the inventory are left out of the targets (the
 * `nodes` check reports them). Touches nothing.
 */
export async function draftPlan(input: PlanInput): Promise<Plan> {
  const { runbook, registry } = input;
  const steps: PlannedStep[] = [];
  for (const [i, step] of runbook.spec.steps.entries()) steps.push(await planStep(input, steps, step, String(i + 1), ['spec', 'steps', i]));

  const guards: PlannedGuard[] = [];
  for (const g of runbook.spec.guards)
    guards.push({
      name: g.name ?? g.probe,
      probeId: g.probe,
      probe: await registry.probe(g.probe),
      params: g.with,
      onViolation: g.onViolation,
      onUnknown: g.onUnknown,
      unknownForMs: g.unknownFor,
    });

  const remediation: PlannedAction[] = [];
  for (const [i, r] of runbook.spec.remediation.entries())
    remediation.push(await planAction(input, `R${i + 1}`, r, ['spec', 'remediation', i]));

  const wf = runbook.spec.rollback.waitFor;
  return {
    runbook,
    file: input.file,
    inventory: input.inventory,
    steps,
    guards,
    remediation,
    objectives: await planObjectives(runbook, registry, steps),
    rollback: {
      waitFor: wf ? { probeId: wf.probe, probe: await registry.probe(wf.probe), params: wf.with } : undefined,
      withinMs: runbook.spec.rollback.within,
    },
    safety: runbook.spec.safety,
    confirms: steps.some((s) => s.kind === 'confirm'),
  };
}

/** An action step or a remediation as the runbook gives it. */
interface GivenAction {
  name?: string;
  action: string;
  with: Record<string, unknown>;
  timeout: number;
  revertLast?: boolean;
  orElse?: Fallback;
  objectives?: StepObjective[];
}

/** An action on its nodes: its `orElse` instead when the server is too old for it, its selector resolved. */
async function planAction(input: PlanInput, index: string, given: GivenAction, at: DocPath): Promise<PlannedAction> {
  let item = given;
  let action = await input.registry.action(given.action);
  let substituted: string | undefined;
  const min = action.meta.minKubernetesMinor;
  const version = input.serverVersion;
  if (given.orElse && min !== undefined && version && !atLeast(version, min)) {
    substituted = `${given.action} needs Kubernetes 1.${min} or newer and the server is ${version.gitVersion}: using ${given.orElse.action}`;
    item = { ...given, ...given.orElse };
    action = await input.registry.action(given.orElse.action);
    at = [...at, 'orElse'];
  }
  const { nodes, ...params } = item.with as { nodes?: NodeSelector } & Record<string, unknown>;
  const onNodes = targetsNodes(action.meta, params);
  const selector = onNodes ? (nodes ?? action.meta.defaultNodes ?? 'all') : undefined;
  const { targets, unresolved } = selector !== undefined ? planTargets(input, selector, at) : { targets: null, unresolved: undefined };
  const on = targets ? ` on ${targets.map((t) => t.name).join(', ') || 'no node'}` : '';
  return {
    kind: 'action',
    index,
    name: item.name ?? `${item.action}${on}`,
    actionId: item.action,
    action,
    params: onNodes ? params : (item.with as Record<string, unknown>),
    targets,
    selector,
    at,
    nodesGiven: nodes !== undefined,
    ...(unresolved ? { unresolved } : {}),
    timeoutMs: item.timeout,
    revertLast: item.revertLast ?? false,
    ...(given.objectives?.length ? { objectives: given.objectives } : {}),
    substituted,
    orElse: !substituted && given.orElse && min !== undefined && !version ? given.orElse.action : undefined,
  };
}

/** The inventory's nodes a selector picks; a label selector without the cluster's Nodes left unresolved when allowed. */
function planTargets(input: PlanInput, selector: NodeSelector, at: DocPath): { targets: InventoryNode[]; unresolved?: true } {
  const known = knownNames(selector, input.inventory.spec.nodes);
  try {
    return { targets: selectNodes(known, input.inventory.spec.nodes, input.clusterNodes, `${pathText(at)}.with.nodes`) };
  } catch (e) {
    if (!(input.labelsUnknown && isKrError(e) && e.code === 'SELECTOR_NEEDS_CLUSTER')) throw e;
    return { targets: [], unresolved: true };
  }
}

/** One step; `earlier` holds the steps planned before it (a revert names one of them). */
async function planStep(input: PlanInput, earlier: PlannedStep[], step: Step, index: string, at: DocPath): Promise<PlannedStep> {
  if ('action' in step) return planAction(input, index, step, at);
  if ('expect' in step) {
    const probe = await input.registry.probe(step.expect.probe);
    return {
      kind: 'expect',
      index,
      name: step.name ?? `expect ${step.expect.probe} ${step.expect.status} within ${formatDuration(step.within)}`,
      probeId: step.expect.probe,
      probe,
      params: step.expect.with,
      status: step.expect.status,
      withinMs: step.within,
    };
  }
  if ('revert' in step) return planRevert(earlier, step.revert, step.name, index, at);
  if ('wait' in step) return { kind: 'wait', index, name: step.name ?? `wait ${formatDuration(step.wait)}`, ms: step.wait };
  if ('confirm' in step) {
    const c = typeof step.confirm === 'string' ? { message: step.confirm } : step.confirm;
    return {
      kind: 'confirm',
      index,
      name: step.name ?? 'confirm',
      message: c.message,
      timeoutMs: ('timeout' in c ? c.timeout : undefined) ?? step.timeout ?? DEFAULT_CONFIRM_TIMEOUT,
      onTimeout: ('onTimeout' in c ? c.onTimeout : undefined) ?? step.onTimeout ?? 'rollback',
    };
  }
  const children: PlannedParallel['children'] = [];
  for (const [i, child] of step.parallel.entries())
    children.push(
      (await planStep(input, earlier, child, `${index}.${i + 1}`, [...at, 'parallel', i])) as PlannedParallel['children'][number],
    );
  return { kind: 'parallel', index, name: step.name ?? `in parallel: ${children.map((c) => c.name).join(' | ')}`, children };
}

/** A revert of the earlier action step named `target`. */
function planRevert(earlier: PlannedStep[], target: string, name: string | undefined, index: string, at: DocPath): PlannedRevert {
  // only earlier steps are planned yet: a revert cannot name a later one
  const actionSteps = stepActions(earlier);
  const step = actionSteps.find((a) => a.name === target);
  if (!step)
    throw new KrError(
      'REVERT_TARGET_UNKNOWN',
      `${pathText(at)}.revert: no earlier action step is named ${quote(target)} (earlier action steps: ${actionSteps.map((a) => `"${a.name}"`).join(', ') || 'none'})`,
      { exit: EXIT.invalid },
    );
  return { kind: 'revert', index, name: name ?? `revert "${step.name}"`, target: step };
}

/** The run's recovery objectives, then each action step's own (measured from that step's revert). */
async function planObjectives(runbook: Runbook, registry: Registry, steps: PlannedStep[]): Promise<PlannedObjective[]> {
  const objectives: PlannedObjective[] = [];
  const planObjective = async (o: StepObjective, from: PlannedObjective['from']) =>
    objectives.push({
      name: o.name,
      probeId: o.probe,
      probe: await registry.probe(o.probe),
      params: o.with,
      from,
      holdForMs: o.holdFor,
      withinMs: o.within,
    });
  for (const o of runbook.spec.objectives) await planObjective(o, o.from);
  for (const a of stepActions(steps))
    for (const o of a.objectives ?? []) await planObjective(o, { revertOf: a.name, label: `${a.index} ${a.name}` });
  return objectives;
}

/** The action steps, in step order (parallel children in order). */
export function stepActions(steps: PlannedStep[]): PlannedAction[] {
  return steps.flatMap((s) => (s.kind === 'action' ? [s] : s.kind === 'parallel' ? s.children.filter((c) => c.kind === 'action') : []));
}

/** Every action the plan may apply: the action steps, then the remediation. */
export function plannedActions(plan: Plan): PlannedAction[] {
  return [...stepActions(plan.steps), ...plan.remediation];
}

/** The selector with only the names the inventory has: the `nodes` check reports the others, at their place. */
function knownNames(selector: NodeSelector, inventory: InventoryNode[]): NodeSelector {
  if (typeof selector !== 'object' || !selector.names) return selector;
  return { ...selector, names: selector.names.filter((n) => inventory.some((i) => i.name === n)) };
}
