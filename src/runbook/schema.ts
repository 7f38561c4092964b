import { z } from 'zod';
import { duration } from '../core/zod-helpers.js';

/**
 * The runbook language. This schema is the truth: `schema/runbook.schema.json` is generated from
 * it. `with:` blocks are checked here only as mappings; the loader checks each against its action's or probe's
 * own schema and replaces it with the parsed value.
 */
const Params = z
  .record(z.string(), z.unknown())
  .meta({ description: 'parameters of the action or probe (see docs/actions.md, docs/probes.md)' });
const Name = z.string().min(1).max(120);
const ModuleId = z.string().regex(/^[a-z][a-z0-9-]*$/, { message: 'expected an id such as stop-kubelet' });

export const ProbeRef = z.strictObject({
  probe: ModuleId,
  with: Params.default({}),
});

const ReadingStatus = z.enum(['ok', 'violated']);

const Guard = z.strictObject({
  name: Name.optional(),
  probe: ModuleId,
  with: Params.default({}),
  onViolation: z
    .enum(['abort', 'remediate', 'warn'])
    .default('abort')
    .meta({ description: 'abort: roll everything back; remediate: apply spec.remediation; warn: log and go on' }),
  onUnknown: z
    .enum(['hold', 'abort', 'ignore'])
    .default('hold')
    .meta({ description: 'hold: start no new step while unknown, abort after unknownFor; abort: at once; ignore' }),
  unknownFor: duration().prefault('60s').meta({ description: 'how long a guard may read unknown before hold turns into abort' }),
});

/** The action used instead where the first one does not work on this cluster (its Kubernetes version is too old). */
const Fallback = z
  .strictObject({
    action: ModuleId,
    with: Params.default({}),
  })
  .meta({
    description:
      "used instead of the action where the cluster cannot run it (the action's minimum Kubernetes version, e.g. disable-taint-eviction needs 1.29); plan and report say which was used",
  });

/** What every recovery objective says: its name, its probe, how long the probe must hold, and the objective. */
const objectiveFields = {
  name: Name,
  probe: ModuleId,
  with: Params.default({}),
  holdFor: duration()
    .prefault('10s')
    .meta({ description: 'how long the probe must stay ok for the clock to stop at its first ok reading' }),
  within: duration().meta({ description: 'the objective: the clock stops within this long, or the objective is missed (the run exits 5)' }),
};

/**
 * A recovery objective: a clock that starts when the run's faults are reverted (or when a named step starts) and stops
 * when its probe first reads ok and stays ok for `holdFor`; met when that happens within `within`.
 */
const Objective = z.strictObject({
  ...objectiveFields,
  from: z
    .union([
      z.literal('revert'),
      z.strictObject({ step: Name.meta({ description: 'the name of a step: the clock starts when that step starts' }) }),
    ])
    .default('revert')
    .meta({
      description:
        "revert: the clock starts when the last of the run's faults is reverted (remediations aside); {step: NAME}: when that step starts",
    }),
});

/** An action step's own recovery objective: its clock starts when the last of that step's faults is reverted. */
const StepObjective = z.strictObject(objectiveFields);

const ActionStep = z.strictObject({
  name: Name.optional(),
  action: ModuleId,
  with: Params.default({}),
  orElse: Fallback.optional(),
  timeout: duration().prefault('5m').meta({ description: 'limit for applying on all targets' }),
  revertLast: z.boolean().default(false).meta({
    description:
      'revert it with the remediations: last, and only once rollback.waitFor holds (for protective steps such as freezing the controller-manager)',
  }),
  objectives: z.array(StepObjective).optional().meta({
    description:
      "recovery objectives of this step: each clock starts when the last of the step's faults is reverted (by a revert step or the rollback)",
  }),
});

const ExpectStep = z.strictObject({
  name: Name.optional(),
  expect: ProbeRef.extend({
    status: ReadingStatus.default('ok').meta({ description: 'the reading to wait for' }),
  }),
  within: duration().prefault('1m').meta({ description: 'the step fails when the reading has not come by then' }),
});

const WaitStep = z.strictObject({
  name: Name.optional(),
  wait: duration(),
});

const OnTimeout = z.enum(['rollback', 'continue']).meta({ description: 'what an unanswered confirmation does' });

const ConfirmStep = z.strictObject({
  name: Name.optional(),
  confirm: z.union([
    z.string().min(1),
    z.strictObject({ message: z.string().min(1), timeout: duration().optional(), onTimeout: OnTimeout.optional() }),
  ]),
  timeout: duration().optional(),
  onTimeout: OnTimeout.optional(),
});

const RevertStep = z.strictObject({
  name: Name.optional(),
  revert: Name.meta({
    description: 'the name of an earlier action step: its faults are reverted now, in reverse order, instead of at rollback',
  }),
});

const ParallelStep = z.strictObject({
  name: Name.optional(),
  parallel: z.array(z.union([ActionStep, ExpectStep, WaitStep])).min(1),
});

export const Step = z.union([ActionStep, ExpectStep, WaitStep, ConfirmStep, RevertStep, ParallelStep]);

const RemediationItem = z.strictObject({
  name: Name.optional(),
  action: ModuleId,
  with: Params.default({}),
  orElse: Fallback.optional(),
  timeout: duration().prefault('5m'),
});

/** A count of nodes or a percentage such as "50%". */
const unavailableLimit = () =>
  z.union([
    z.number().int().min(0),
    z.string().regex(/^(?:100|[1-9]?[0-9])%$/, { message: 'expected a count or a percentage such as 50%' }),
  ]);

export const Runbook = z.strictObject({
  apiVersion: z.literal('kube-runbook/v1'),
  kind: z.literal('Runbook'),
  metadata: z.strictObject({
    name: z.string().regex(/^[a-z0-9][a-z0-9.-]*$/, { message: 'expected a lowercase name such as apiserver-outage' }),
    description: z.string().optional(),
    tags: z.array(z.string().min(1)).optional(),
  }),
  spec: z.strictObject({
    safety: z
      .strictObject({
        allowContexts: z
          .array(z.string().min(1))
          .default([])
          .meta({
            description:
              'kubeconfig context names (globs: staging-*) the runbook may run against; `CONTEXT@SERVER` also matches the ' +
              'apiserver URL (lab@https://10.213.0.2:6443; in a pod the context is `in-cluster`: in-cluster@https://10.96.0.1:443); none = refuse every context; ' +
              'a pattern with no letter or digit, other than a scheme or a port after the @ (*, ?*, *-*, *@?*, *@https://*), names no cluster: it allows every context, and `run` then needs --context NAME',
          }),
        maxDuration: duration().prefault('30m').meta({ description: 'the run is aborted and rolled back after this long' }),
        faultTtl: duration().prefault('10m').meta({
          description:
            "a fault's node-side dead-man reverts it this long after the executor's last keepalive; a revert failing for a transient reason (a reset connection, an apiserver 503) is tried again for up to this long after the rollback starts",
        }),
        remediationTtl: duration().prefault('1h').meta({
          description:
            "a remediation's (and a protective step's) node-side dead-man undoes it only this long after the executor's last keepalive: longer than faultTtl, because a node cannot tell whether the cluster's leases are fresh again while the apiserver may be unreachable, and undoing a remediation too early is the cascade it prevents",
        }),
        lockNamespace: z
          .string()
          .regex(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/, { message: 'expected a namespace name' })
          .default('kube-system')
          .meta({
            description:
              'namespace of the Lease kube-runbook-run-lock that a run holds while it has anything applied (one run per cluster at a time)',
          }),
        maxUnavailable: z
          .strictObject({
            controlPlane: unavailableLimit().default(1),
            worker: unavailableLimit().default('50%'),
          })
          .prefault({})
          .meta({
            description:
              "at most this many nodes of each role (a count, or a percentage of the inventory's nodes of that role, rounded up) faulted at once by the steps; a plan that would exceed it is refused. Protective steps (revertLast) and remediations do not count",
          }),
      })
      .prefault({}),
    guards: z.array(Guard).default([]),
    steps: z.array(Step).min(1),
    remediation: z.array(RemediationItem).default([]),
    objectives: z
      .array(Objective)
      .default([])
      .meta({ description: 'recovery objectives, measured after the faults are reverted (the run waits for each to be met or missed)' }),
    rollback: z
      .strictObject({
        waitFor: ProbeRef.optional().meta({ description: 'must read ok before remediations are undone' }),
        within: duration().prefault('5m'),
      })
      .prefault({}),
  }),
});

/**
 * Where a runbook names an action or a probe and gives it `with:` parameters: any mapping of the language that has
 * `with:` beside `action:` or `probe:`. The one rule for both the JSON Schema (json-schema.ts, which gives such a
 * mapping its module's own `with:` schema) and the loader (params.ts, which checks each against its module).
 */
export function moduleKindOf(keys: readonly string[]): 'action' | 'probe' | undefined {
  if (!keys.includes('with')) return undefined;
  return keys.includes('probe') ? 'probe' : keys.includes('action') ? 'action' : undefined;
}

export type Runbook = z.output<typeof Runbook>;
export type Step = z.output<typeof Step>;
export type ProbeRef = z.output<typeof ProbeRef>;
export type Fallback = z.output<typeof Fallback>;
export type StepObjective = z.output<typeof StepObjective>;
