import { z } from 'zod';

/**
 * The version of `plan -o json`'s shape. It grows by one when a field changes meaning or goes away (a new optional
 * field does not change it).
 */
export const PLAN_VERSION = 1;

const ms = (what: string) => z.number().describe(`${what}, in milliseconds`);
const params = z.record(z.string(), z.unknown()).describe("the module's parameters as planned (durations in milliseconds)");
const targets = z
  .array(z.string())
  .nullable()
  .describe('the nodes it is applied on, resolved from the inventory and the cluster; null: cluster-wide');

const access = z.union([
  z.object({
    apiGroup: z.string(),
    resource: z.string(),
    verbs: z.array(z.string()),
    namespace: z.string().optional(),
    name: z.string().optional(),
  }),
  z.object({ nonResourceURL: z.string(), verbs: z.array(z.string()) }),
]);

const action = {
  index: z.string(),
  name: z.string(),
  action: z.string().describe('the action id the run applies (the orElse one where the server is too old for the first)'),
  params,
  targets,
  describe: z
    .string()
    .nullable()
    .describe("the action's own account of what it does with these params (a load: who sends it and what its identity is granted)"),
  orElse: z.string().nullable().describe('the fallback still to choose from at run time (planned without the server version)'),
  substituted: z.string().nullable().describe('why the runbook’s orElse replaced the action it names'),
  undoneThroughAgents: z.string().nullable().describe('how a fault on nodes reached through agents is undone'),
  access: z.array(access).describe('the API permissions the executor uses for it (kube-runbook manifests grants them)'),
};

const actionStep = z.object({ kind: z.literal('action'), ...action, revertLast: z.boolean(), timeoutMs: ms('how long apply may take') });
const expectStep = z.object({
  kind: z.literal('expect'),
  index: z.string(),
  name: z.string(),
  probe: z.string(),
  params,
  status: z.enum(['ok', 'violated']),
  withinMs: ms('how long the probe has to read that status'),
});
const waitStep = z.object({ kind: z.literal('wait'), index: z.string(), name: z.string(), ms: ms('how long it waits') });
const confirmStep = z.object({
  kind: z.literal('confirm'),
  index: z.string(),
  name: z.string(),
  message: z.string(),
  timeoutMs: ms('how long it waits for an answer'),
  onTimeout: z.enum(['rollback', 'continue']),
});
const revertStep = z.object({
  kind: z.literal('revert'),
  index: z.string(),
  name: z.string(),
  target: z.object({ index: z.string(), action: z.string(), targets }).describe('the action step it reverts now'),
});
const parallelStep = z.object({
  kind: z.literal('parallel'),
  index: z.string(),
  name: z.string(),
  children: z.array(z.discriminatedUnion('kind', [actionStep, expectStep, waitStep])),
});

/** `kube-runbook plan -o json`: everything the text plan says, as data. */
export const PlanJson = z.object({
  planVersion: z.literal(PLAN_VERSION),
  runbook: z.string().describe("the runbook's metadata.name"),
  file: z.string(),
  description: z.string().nullable(),
  inventory: z.object({ name: z.string(), layout: z.string(), nodes: z.array(z.string()) }),
  context: z.string().nullable().describe('the kubeconfig context planned against; null offline'),
  offline: z.boolean(),
  safety: z.object({
    allowContexts: z.array(z.string()),
    maxDurationMs: ms('the run is aborted and rolled back after this long'),
    faultTtlMs: ms("a fault's node-side dead-man reverts it this long after the last keepalive"),
    remediationTtlMs: ms("a remediation's node-side dead-man undoes it this long after the last keepalive"),
    lockNamespace: z.string(),
    maxUnavailable: z.object({ controlPlane: z.union([z.number(), z.string()]), worker: z.union([z.number(), z.string()]) }),
  }),
  guards: z.array(
    z.object({
      name: z.string(),
      probe: z.string(),
      params,
      onViolation: z.enum(['abort', 'remediate', 'warn']),
      onUnknown: z.enum(['hold', 'abort', 'ignore']),
      unknownForMs: ms('with onUnknown hold: how long unknown readings are held before the run aborts'),
    }),
  ),
  steps: z.array(z.discriminatedUnion('kind', [actionStep, expectStep, waitStep, confirmStep, revertStep, parallelStep])),
  warnings: z.array(z.string()).describe('what preflight refuses (a node agent needed while the control plane is down)'),
  remediation: z.array(z.object(action)).describe('applied once, when a guard says remediate'),
  rollback: z.object({
    order: z
      .array(
        z.discriminatedUnion('kind', [
          z.object({
            kind: z.literal('revert'),
            step: z.string(),
            action: z.string(),
            targets,
            unlessRevertedEarly: z.boolean().describe('a revert step may have reverted it already'),
          }),
          z.object({
            kind: z.literal('wait'),
            probe: z.string(),
            params,
            withinMs: ms('at most this long; else what follows stays applied'),
          }),
          z.object({ kind: z.literal('undo-remediation'), index: z.string(), action: z.string(), targets }),
        ]),
      )
      .describe('what the rollback does, in order, on success, failure, abort and signals'),
  }),
  objectives: z.array(
    z.object({
      name: z.string(),
      probe: z.string(),
      params,
      from: z.union([z.literal('revert'), z.object({ step: z.string() }), z.object({ revertOf: z.string(), label: z.string() })]),
      holdForMs: ms('how long the probe must stay ok'),
      withinMs: ms('the objective'),
    }),
  ),
  sensitiveGrants: z
    .array(z.object({ grant: z.string(), why: z.string() }))
    .describe('permissions the run needs that give more than they read like (docs/security.md)'),
});
export type PlanJson = z.infer<typeof PlanJson>;
