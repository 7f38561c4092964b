import { EXIT, KrError, quote } from '../core/errors.js';
import { type DocPath, formatProblem, pathText, type Problem, sortProblems } from '../document/problems.js';
import { agentOutageSteps } from './agents.js';
import { blastRadiusProblems } from './blast-radius.js';
import { contextAllowed } from './contexts.js';
import { draftPlan, type Plan, type PlanInput, type PlannedAction, plannedActions } from './plan.js';

/**
 * The checks a plan gets that need no cluster: they read only the runbook and the inventory (through a plan drafted
 * from them). `plan` and `run` refuse what the `plan` stage finds once the plan is made (buildPlan), preflight reports
 * what the `preflight` stage finds among its checks, and `validate RUNBOOK INVENTORY` and `plan --offline` run both
 * stages and print every problem at FILE:LINE:COL.
 */

/** One problem a static check finds, at a path of the runbook or of the inventory. */
export interface StaticProblem {
  /** The check's name (preflight reports it under that name). */
  check: string;
  /** A stable code (the refusal's KrError code when it is the first). */
  code: string;
  doc: 'runbook' | 'inventory';
  path: DocPath;
  message: string;
}

/** What the checks know besides the plan. */
export interface StaticEnv {
  /**
   * The kubeconfig context the run would use, when known without a cluster (the inventory's, with no --context):
   * checked against spec.safety.allowContexts. Preflight checks the context actually used instead.
   */
  context?: string;
}

export type Stage = 'plan' | 'preflight';

interface StaticCheck {
  name: string;
  /** `plan`: buildPlan refuses it (exit 2); `preflight`: preflight reports it (exit 3). `validate` runs both. */
  stage: Stage;
  run(plan: Plan, env: StaticEnv): StaticProblem[];
}

/** Where a step's nodes are said: its `with.nodes` when the runbook gives it, else its `action` (the default selector). */
const nodesPath = (a: PlannedAction): DocPath => [...a.at, ...(a.nodesGiven ? ['with', 'nodes'] : ['action'])];

const ROLE_OF_WORD = { workers: 'worker', 'control-plane': 'control-plane' } as const;

/** The one list: each check by name, in the order their problems are reported. */
const STATIC_CHECKS: readonly StaticCheck[] = [
  {
    name: 'context',
    stage: 'preflight',
    run(plan, env) {
      if (env.context === undefined) return [];
      const patterns = plan.safety.allowContexts;
      // without a cluster the server is not known: a CONTEXT@SERVER pattern is judged by its context alone
      if (patterns.some((p) => contextAllowed(env.context!, '', [p.replace(/@.*$/, '')]))) return [];
      const given = plan.runbook.spec.safety.allowContexts.length > 0;
      return [
        {
          check: 'context',
          code: 'CONTEXT_NOT_ALLOWED',
          doc: 'runbook',
          path: given ? ['spec', 'safety', 'allowContexts'] : ['spec'],
          message:
            `the inventory's context ${quote(env.context)} is not in spec.safety.allowContexts (${patterns.map((p) => quote(p)).join(', ') || 'none listed: every context is refused'}); ` +
            `add it to spec.safety.allowContexts, or run with --context NAME`,
        },
      ];
    },
  },
  {
    name: 'nodes',
    stage: 'plan',
    run(plan) {
      const inventory = plan.inventory.spec.nodes;
      const roles = [...new Set(inventory.flatMap((n) => n.roles))].sort();
      const problems: StaticProblem[] = [];
      const problem = (path: DocPath, message: string, code: string) =>
        problems.push({ check: 'nodes', code, doc: 'runbook', path, message });
      for (const a of plannedActions(plan)) {
        const sel = a.selector;
        if (!a.nodesGiven || sel === undefined || sel === 'all') continue;
        const at = nodesPath(a);
        const role = typeof sel === 'string' ? ROLE_OF_WORD[sel] : sel.role;
        if (role && !inventory.some((n) => n.roles.includes(role)))
          problem(
            typeof sel === 'string' ? at : [...at, 'role'],
            `no node of the inventory has the role ${quote(role)} (roles it has: ${roles.join(', ')})`,
            'ROLE_NOT_IN_INVENTORY',
          );
        if (typeof sel === 'object')
          for (const [i, name] of (sel.names ?? []).entries())
            if (!inventory.some((n) => n.name === name))
              problem(
                [...at, 'names', i],
                `node ${quote(name)} is not in the inventory (known: ${inventory
                  .map((n) => n.name)
                  .sort()
                  .join(', ')})`,
                'NODE_NOT_IN_INVENTORY',
              );
      }
      return problems;
    },
  },
  {
    name: 'layouts',
    stage: 'plan',
    run(plan) {
      const layout = plan.inventory.spec.layout;
      return plannedActions(plan).flatMap((a) => {
        const layouts = a.action.meta.layouts ?? {};
        const said = layouts[layout];
        if (typeof said !== 'object') return [];
        const works = Object.entries(layouts).flatMap(([k, v]) => (typeof v === 'string' ? [k] : []));
        return [
          {
            check: 'layouts',
            code: 'LAYOUT_UNSUPPORTED',
            doc: 'runbook' as const,
            path: [...a.at, 'action'],
            message: `${a.actionId} is refused on the inventory's layout ${quote(layout)}: ${said.refused} (it works on ${works.join(', ') || 'no layout'})`,
          },
        ];
      });
    },
  },
  {
    name: 'maxUnavailable',
    stage: 'plan',
    run: (plan) =>
      blastRadiusProblems(plan.steps, plan.inventory.spec.nodes, plan.safety.maxUnavailable).map((p) => ({
        check: 'maxUnavailable',
        code: 'MAX_UNAVAILABLE',
        doc: 'runbook',
        ...p,
      })),
  },
  {
    name: 'agents',
    stage: 'preflight',
    run: (plan) =>
      agentOutageSteps(plan).map(({ step, message }) => ({
        check: 'agents',
        code: 'AGENTS_DURING_OUTAGE',
        doc: 'runbook',
        path: [...step.at, 'action'],
        message,
      })),
  },
];

/** Every problem the static checks of `stage` (both when absent) find, in the list's order. */
export function staticProblems(plan: Plan, env: StaticEnv, stage?: Stage): StaticProblem[] {
  return STATIC_CHECKS.filter((c) => !stage || c.stage === stage).flatMap((c) => c.run(plan, env));
}

/** Where a document's paths are: its file, and the line and column of a path. */
interface SourceLocator {
  file: string;
  locate(path: DocPath): { line: number; col: number };
}
export interface SourceLocators {
  runbook: SourceLocator;
  inventory: SourceLocator;
}

/** The problems of each file, as validate prints them (`FILE:LINE:COL: PATH: message`); positions need `sources`. */
export function positioned(problems: readonly StaticProblem[], sources: SourceLocators): { file: string; problems: Problem[] }[] {
  return (['runbook', 'inventory'] as const).flatMap((doc) => {
    const of = problems.filter((p) => p.doc === doc);
    if (!of.length) return [];
    const src = sources[doc];
    return [
      { file: src.file, problems: sortProblems(of.map((p) => ({ ...src.locate(p.path), path: pathText(p.path), message: p.message }))) },
    ];
  });
}

/** One line per problem: `FILE:LINE:COL: PATH: message` with sources, `PATH: message` without. */
function staticLines(problems: readonly StaticProblem[], sources?: SourceLocators): string[] {
  if (!sources) return problems.map((p) => `${pathText(p.path)}: ${p.message}`);
  return positioned(problems, sources).flatMap((f) => f.problems.map((p) => formatProblem(f.file, p)));
}

/** The refusal of a plan that breaks static checks (exit 2): the first problem's code, every problem a line. */
function staticRefusal(problems: readonly StaticProblem[], sources?: SourceLocators): KrError {
  const lines = staticLines(problems, sources);
  if (lines.length === 1) return new KrError(problems[0]!.code, lines[0]!, { exit: EXIT.invalid });
  return new KrError(problems[0]!.code, `the plan is refused: ${lines.length} problems`, { exit: EXIT.invalid, details: lines });
}

/**
 * Turns a validated runbook and an inventory into concrete steps on concrete nodes (draftPlan), refusing (exit 2) a
 * plan that breaks a static check of the `plan` stage, every problem at FILE:LINE:COL when `sources` are given.
 * Touches nothing.
 */
export async function buildPlan(input: PlanInput, o: { env?: StaticEnv; sources?: SourceLocators } = {}): Promise<Plan> {
  const plan = await draftPlan(input);
  const problems = staticProblems(plan, o.env ?? {}, 'plan');
  if (problems.length) throw staticRefusal(problems, o.sources);
  return plan;
}
