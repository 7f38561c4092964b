import { z } from 'zod';
import type { Json } from '../contract/action.js';
import { defineAction } from '../contract/action.js';
import type { ActionCtx } from '../contract/context.js';
import { formatDuration } from '../core/duration.js';
import { KrError, quote } from '../core/errors.js';
import { duration } from '../core/zod-helpers.js';
import { ApiStatusError } from '../kube/source.js';
import type { KubeAccess } from '../kube/types.js';
import {
  busiest,
  FLOWCONTROL,
  type FlowSchema,
  labelsOf,
  levelObject,
  NAME_PREFIX,
  PROTECTED_LEVELS,
  protectedPrecedence,
  protectedSubject,
  protectedWhy,
  schemaObject,
  type Subject,
  subjectText,
} from './parts/flow-control.js';
import { DNS_LABEL, DNS_SUBDOMAIN } from '../core/names.js';

const USER = z.string().regex(/^[\x21-\x7e]{1,253}$/, { message: 'expected a user or group name (printable, no spaces)' });

const SubjectParam = z.union([
  z.strictObject({ user: USER.meta({ description: 'a user name, as the apiserver authenticates it' }) }),
  z.strictObject({ group: USER.meta({ description: 'a group name' }) }),
  z.strictObject({
    serviceAccount: z
      .string()
      .refine((v) => {
        const [ns, name, more] = v.split('/');
        return more === undefined && DNS_LABEL.test(ns ?? '') && (name === '*' || DNS_SUBDOMAIN.test(name ?? ''));
      }, 'expected a ServiceAccount as namespace/name (name * for all of a namespace)')
      .meta({ description: 'a ServiceAccount as namespace/name, or namespace/* for every one of a namespace' }),
  }),
]);

const Params = z
  .strictObject({
    subjects: z.array(SubjectParam).min(1).max(20).optional().meta({
      description:
        'the clients to shed, each `{user: NAME}`, `{group: NAME}` or `{serviceAccount: NAMESPACE/NAME}` (FlowSchema subjects); or leave it out and give `top`',
    }),
    verbs: z
      .array(z.enum(['*', 'get', 'list', 'watch', 'create', 'update', 'patch', 'delete', 'deletecollection']))
      .min(1)
      .optional()
      .meta({ description: 'with `subjects`: the verbs of theirs to shed (default all, also non-resource requests such as /healthz)' }),
    resources: z
      .array(z.string().regex(/^(\*|[a-z][a-z0-9.]*(\/[a-z]+)?)$/, { message: 'expected a resource such as pods, pods/status or *' }))
      .min(1)
      .optional()
      .meta({ description: 'with `subjects`: the resources (plural, any API group) of theirs to shed (default all)' }),
    top: z.number().int().min(1).max(5).optional().meta({
      description:
        "shed the `top` busiest FlowSchemas of the apiserver's /metrics instead (requests dispatched and rejected over `window`, plus those queued), but never those of the protected levels",
    }),
    window: duration().prefault('5s').meta({ description: 'with `top`: how long the requests are counted before choosing' }),
    shares: z.number().int().min(1).max(100).default(1).meta({
      description: "the low priority level's nominalConcurrencyShares (the stock levels have 20 to 100); it lends and borrows none",
    }),
    queueLength: z.number().int().min(1).max(1000).default(10).meta({
      description: "the length of the low level's one queue: what does not fit is rejected with 429, and clients back off",
    }),
  })
  .superRefine((p, c) => {
    if (p.subjects && p.top !== undefined) c.addIssue({ code: 'custom', path: ['top'], message: 'give subjects or top, not both' });
    if (!p.subjects && p.top === undefined) c.addIssue({ code: 'custom', path: [], message: 'give subjects (the clients to shed) or top' });
    // the subjects known without a cluster to carry its heartbeat or control loops: refused where they are written
    p.subjects?.forEach((s, i) => {
      const subject = toSubject(s);
      const why = protectedSubject(subject);
      if (why) c.addIssue({ code: 'custom', path: ['subjects', i], message: `never shed ${subjectText(subject)}: ${why}` });
    });
    for (const k of ['verbs', 'resources'] as const)
      if (p[k] && !p.subjects) c.addIssue({ code: 'custom', path: [k], message: `${k} narrows subjects: it goes with subjects, not top` });
  });
type Params = z.output<typeof Params>;

type State = {
  /** The PriorityLevelConfiguration and FlowSchemas it creates, whole: apply writes them, revert deletes them by name. */
  level: { [k: string]: Json };
  schemas: { [k: string]: Json }[];
  /** What each FlowSchema sheds, for logs and reports. */
  shed: string[];
};

export default defineAction<typeof Params, State>({
  meta: {
    id: 'shed-apiserver-load',
    summary: 'Put the busiest or named API clients in a low priority level with a FlowSchema: an overloaded apiserver serves the rest.',
    description:
      'Creates a PriorityLevelConfiguration with few concurrency shares (`shares`, none lent or borrowed) and one short queue ' +
      '(`queueLength`; the rest is rejected with 429 and clients back off), and a FlowSchema that sends the chosen clients there ' +
      '(flowcontrol.apiserver.k8s.io/v1, API Priority and Fairness). The clients are the `subjects` named, or the `top` busiest ' +
      "FlowSchemas by the apiserver's /metrics (`apiserver_flowcontrol_dispatched_requests_total` and `…_rejected_requests_total` " +
      'over `window`, plus `…_current_inqueue_requests`): each is copied, rules, subjects and distinguisher, into a FlowSchema of ' +
      'matchingPrecedence one lower (matched first), so it takes exactly the requests the original took. Never shed: the levels ' +
      `${PROTECTED_LEVELS.join(', ')} and their FlowSchemas' subjects (kubelets' Lease renewals, the controller-manager's and the ` +
      "scheduler's leader election, system:masters, kube-system's ServiceAccounts): `validate` refuses those named " +
      'in the runbook (system:masters, system:nodes, system:node:*, system:kube-controller-manager, system:kube-scheduler, ' +
      "kube-system's ServiceAccounts), preflight and prepare also those the cluster's FlowSchemas put in such a level " +
      '(`SHED_PROTECTED`). Named subjects get a matchingPrecedence above every FlowSchema of those levels, so their clients ' +
      'are matched there first whatever is named; a FlowSchema matched before that one which names the same subject keeps ' +
      'their requests, and prepare says so (`top` copies such a FlowSchema instead). The objects are named `kube-runbook-shed-…` and labelled with the run; ' +
      'preflight says what it will create.',
    params: Params,
    targets: 'cluster',
    kind: 'remediation',
    layouts: {
      kubeadm: "objects of the apiserver's flowcontrol API; every apiserver of the cluster applies them within seconds",
      k3s: "objects of the k3s server's flowcontrol API",
      lab: "objects of the lab's apiserver (each member's, with several control planes)",
    },
    undo:
      'deletes the FlowSchemas, then the priority level (one already gone counts as deleted); the clients are classified as before at ' +
      'once. It is written in the journal before it is created: `kube-runbook recover` deletes what a run that died left. It ' +
      'runs on no node and has no node-side timer: until a revert or `recover`, the objects stay',
    access: [
      {
        apiGroup: 'flowcontrol.apiserver.k8s.io',
        resource: 'flowschemas',
        verbs: ['list', 'create', 'delete'],
        why: 'reads the FlowSchemas (which clients are protected, what the busiest match), creates its own and deletes them',
      },
      {
        apiGroup: 'flowcontrol.apiserver.k8s.io',
        resource: 'prioritylevelconfigurations',
        verbs: ['create', 'delete'],
        why: 'creates its low priority level and deletes it',
      },
      { nonResourceURL: '/metrics', verbs: ['get'], why: 'with `top`: finds the busiest FlowSchemas in the apiserver metrics' },
    ],
  },

  async preflight(ctx, params) {
    const schemas = await flowSchemas(ctx);
    if (params.subjects) {
      const subjects = params.subjects.map(toSubject);
      refuseProtected(protectedWhy(subjects, schemas));
      ctx.log.info(
        `shed-apiserver-load: will create the priority level ${NAME_PREFIX}… (${shaping(params)}) and a FlowSchema of ` +
          `matchingPrecedence ${namedPrecedence(schemas)} for ${subjects.map(subjectText).join(', ')}`,
      );
      return;
    }
    const r = await api(ctx).raw('/metrics', { timeoutMs: 10_000, signal: ctx.signal });
    if (r.status !== 200) throw new KrError('PREFLIGHT_FAILED', `shed-apiserver-load: the apiserver's /metrics answered ${r.status}`);
    ctx.log.info(
      `shed-apiserver-load: will create the priority level ${NAME_PREFIX}… (${shaping(params)}) and a FlowSchema for each of the ` +
        `${params.top} busiest FlowSchemas over ${formatDuration(params.window)} when the step runs (never of ${PROTECTED_LEVELS.join(', ')})`,
    );
  },

  async prepare(ctx, params) {
    const schemas = await flowSchemas(ctx);
    const base = `${NAME_PREFIX}${suffixOf(ctx)}`;
    const labels = labelsOf(ctx.runId);
    const level = levelObject(base, labels, params);
    if (params.subjects) {
      const subjects = params.subjects.map(toSubject);
      refuseProtected(protectedWhy(subjects, schemas));
      const verbs = params.verbs ?? ['*'];
      const resources = params.resources ?? ['*'];
      const rules: Json[] = [
        {
          subjects,
          resourceRules: [{ verbs, apiGroups: ['*'], resources, clusterScope: true, namespaces: ['*'] }],
          ...(resources.includes('*') ? { nonResourceRules: [{ verbs, nonResourceURLs: ['*'] }] } : {}),
        },
      ];
      warnShadowed(ctx, subjects, schemas);
      return {
        level,
        schemas: [schemaObject(`${base}-1`, labels, base, namedPrecedence(schemas), rules, 'ByUser')],
        shed: [subjects.map(subjectText).join(', ')],
      };
    }
    const before = await metrics(ctx);
    await ctx.clock.sleep(params.window, ctx.signal);
    const ranked = busiest(before, await metrics(ctx));
    const byName = new Map(schemas.map((f) => [f.metadata.name, f]));
    const chosen = ranked
      .map((r) => ({ ...r, schema: byName.get(r.name) }))
      .filter(
        (r) =>
          r.schema !== undefined &&
          !r.name.startsWith(NAME_PREFIX) &&
          !PROTECTED_LEVELS.includes(r.schema.spec.priorityLevelConfiguration.name) &&
          (r.schema.spec.rules?.length ?? 0) > 0,
      )
      .slice(0, params.top);
    if (chosen.length === 0)
      throw new KrError(
        'SHED_NOTHING',
        `shed-apiserver-load: no FlowSchema outside ${PROTECTED_LEVELS.join(', ')} served requests over ${formatDuration(params.window)}`,
      );
    return {
      level,
      schemas: chosen.map(({ schema, requests }, i) => {
        const f = schema!;
        refuseProtected(
          protectedWhy(
            f.spec.rules!.flatMap((r) => r.subjects),
            schemas,
          ),
          f.metadata.name,
        );
        const precedence = (f.spec.matchingPrecedence ?? 1000) - 1;
        const taken = schemas.find((o) => o.spec.matchingPrecedence === precedence && !o.metadata.name.startsWith(NAME_PREFIX));
        if (precedence < 1 || taken)
          throw new KrError(
            'SHED_PRECEDENCE_TAKEN',
            `shed-apiserver-load: cannot match before the FlowSchema ${f.metadata.name} (matchingPrecedence ${precedence + 1}): ` +
              (taken ? `the FlowSchema ${taken.metadata.name} has ${precedence}` : 'nothing comes before 1') +
              '; name its clients with subjects instead',
          );
        ctx.log.info(`shed-apiserver-load: ${f.metadata.name} served ${requests} requests over ${formatDuration(params.window)}`);
        return schemaObject(`${base}-${i + 1}`, labels, base, precedence, f.spec.rules as Json[], f.spec.distinguisherMethod?.type);
      }),
      shed: chosen.map((c) => `the FlowSchema ${c.name} (${c.schema!.spec.priorityLevelConfiguration.name})`),
    };
  },

  async apply(ctx, state) {
    const kube = api(ctx);
    for (const [kind, body] of [
      ['prioritylevelconfigurations', state.level] as const,
      ...state.schemas.map((s) => ['flowschemas', s] as const),
    ])
      await kube.json!(`${FLOWCONTROL}/${kind}`, { method: 'POST', body, timeoutMs: 10_000, signal: ctx.signal }).catch((e: unknown) => {
        // a remediation's apply is tried again: what the first attempt created is there
        if (!(e instanceof ApiStatusError && e.status === 409)) throw e;
      });
    ctx.log.info(
      `shed-apiserver-load: ${state.shed.join('; ')} now served by the priority level ${nameOf(state.level)} (${state.schemas.map(nameOf).join(', ')})`,
    );
    return state;
  },

  async revert(ctx, state) {
    const kube = api(ctx);
    for (const [kind, body] of [
      ...state.schemas.map((s) => ['flowschemas', s] as const),
      ['prioritylevelconfigurations', state.level] as const,
    ])
      await kube.json!(`${FLOWCONTROL}/${kind}/${nameOf(body)}`, { method: 'DELETE', timeoutMs: 10_000, signal: ctx.signal }).catch(
        (e: unknown) => {
          if (!(e instanceof ApiStatusError && e.status === 404)) throw e;
        },
      );
  },

  // it runs on no node: the objects are the apiserver's; the journal keeps their names for recover
  nodeSideRevert: () => undefined,

  describe: (p) =>
    `create the priority level ${NAME_PREFIX}<run> (${shaping(p)}) and a FlowSchema ${NAME_PREFIX}<run>-N sending ` +
    (p.subjects
      ? `${p.subjects.map((s) => subjectText(toSubject(s))).join(', ')} there (matchingPrecedence above the protected levels')`
      : `the ${p.top} busiest FlowSchemas' requests over ${formatDuration(p.window)} there (each copied, matchingPrecedence one lower)`) +
    `; never ${PROTECTED_LEVELS.join(', ')}; deleted on revert`,
});

function api(ctx: ActionCtx): KubeAccess {
  const kube = ctx.kube;
  if (!kube.json) throw new KrError('KUBE_UNAVAILABLE', 'shed-apiserver-load: this cluster access cannot send requests');
  return kube;
}

async function flowSchemas(ctx: ActionCtx): Promise<FlowSchema[]> {
  const list = await api(ctx).json!<{ items?: FlowSchema[] }>(`${FLOWCONTROL}/flowschemas`, { timeoutMs: 10_000, signal: ctx.signal });
  return list.items ?? [];
}

async function metrics(ctx: ActionCtx): Promise<string> {
  const r = await api(ctx).raw('/metrics', { timeoutMs: 10_000, signal: ctx.signal });
  if (r.status !== 200)
    throw new KrError('SHED_METRICS', `shed-apiserver-load: the apiserver's /metrics answered ${r.status} ${quote(r.body, 200)}`);
  return r.body;
}

/** A FlowSchema matched before the new one that names a subject keeps their requests: said, not refused. */
function warnShadowed(ctx: ActionCtx, subjects: readonly Subject[], schemas: readonly FlowSchema[]): void {
  const at = namedPrecedence(schemas);
  for (const f of schemas)
    for (const s of subjects)
      if (
        (f.spec.matchingPrecedence ?? 1000) < at &&
        (f.spec.rules ?? []).some((r) => r.subjects.some((x) => JSON.stringify(x) === JSON.stringify(s)))
      )
        ctx.log.warn(
          `shed-apiserver-load: the FlowSchema ${f.metadata.name} (matchingPrecedence ${f.spec.matchingPrecedence}) is matched before ` +
            `${at} and names ${subjectText(s)}: what it matches is not shed (top: 1 sheds by copying it instead)`,
        );
}

function refuseProtected(why: string | undefined, schema?: string): void {
  if (why)
    throw new KrError(
      'SHED_PROTECTED',
      `shed-apiserver-load: will not shed ${schema ? `the FlowSchema ${schema}: ` : ''}${why}; shedding it would starve the cluster's own heartbeat or control loops`,
    );
}

/** Above every FlowSchema of a protected level, so their clients are matched there first whatever is named. */
const namedPrecedence = (schemas: readonly FlowSchema[]): number => protectedPrecedence(schemas) + 1;

const shaping = (p: Pick<Params, 'shares' | 'queueLength'>) =>
  `${p.shares} concurrency share${p.shares === 1 ? '' : 's'}, one queue of ${p.queueLength}`;

const nameOf = (o: { [k: string]: Json }): string => (o.metadata as { name: string }).name;

function toSubject(s: z.output<typeof SubjectParam>): Subject {
  if ('user' in s) return { kind: 'User', user: { name: s.user } };
  if ('group' in s) return { kind: 'Group', group: { name: s.group } };
  const [namespace, name] = s.serviceAccount.split('/') as [string, string];
  return { kind: 'ServiceAccount', serviceAccount: { namespace, name } };
}

/** The run's, and this step's: two steps of one run get names of their own. */
function suffixOf(ctx: ActionCtx): string {
  return `${ctx.runId}-${ctx.clock.now().toString(36)}`
    .toLowerCase()
    .replace(/[^a-z0-9-]/g, '-')
    .slice(-36)
    .replace(/^-+/, '');
}
