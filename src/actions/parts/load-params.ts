import { z } from 'zod';
import { EXIT, KrError, quote } from '../../core/errors.js';
import {
  LOAD_NAMESPACE,
  LOAD_RESOURCES,
  type LoadRequest,
  type LoadResource,
  type LoadVerb,
  type OwnObjects,
  WRITE_VERBS,
  isWritable,
} from './api-load.js';
import { type IdentityRef, describeRules, runIdentity } from './load-identity.js';
import { DNS_LABEL, DNS_SUBDOMAIN } from '../../core/names.js';

/** load-apiserver's parameters, its state, and how it describes itself. */
const RESOURCES = Object.keys(LOAD_RESOURCES) as [LoadResource, ...LoadResource[]];

const Request = z
  .strictObject({
    verb: z.enum(['get', 'list', ...WRITE_VERBS]).meta({ description: 'get, list, create, update or patch' }),
    resource: z.enum(RESOURCES).meta({ description: `one of ${RESOURCES.join(', ')}` }),
    namespace: z.string().regex(DNS_LABEL, { message: 'expected a namespace name' }).optional(),
    name: z.string().regex(DNS_SUBDOMAIN, { message: 'expected an object name' }).optional(),
    weight: z.number().int().min(1).max(1000).default(1),
  })
  .superRefine((r, c) => {
    const info = LOAD_RESOURCES[r.resource];
    const writes = (WRITE_VERBS as readonly string[]).includes(r.verb);
    if (writes && !isWritable(r.resource))
      c.addIssue({
        code: 'custom',
        path: ['resource'],
        message: `${r.verb} writes only its own configmaps or leases in ${LOAD_NAMESPACE}, not ${r.resource}`,
      });
    if ((writes || (r.verb === 'get' && !r.name)) && r.namespace !== undefined && r.namespace !== LOAD_NAMESPACE)
      c.addIssue({ code: 'custom', path: ['namespace'], message: `its own objects are in ${LOAD_NAMESPACE}: leave namespace out` });
    if (writes && r.name !== undefined)
      c.addIssue({ code: 'custom', path: ['name'], message: `${r.verb} reaches only the object the action creates: leave name out` });
    if (r.verb === 'list' && (r.name !== undefined || 'sub' in info))
      c.addIssue({
        code: 'custom',
        path: [r.name === undefined ? 'resource' : 'name'],
        message: `list takes a collection, not ${r.name ?? r.resource}`,
      });
    if (r.verb === 'get' && !r.name && !isWritable(r.resource))
      c.addIssue({ code: 'custom', path: ['verb'], message: `get ${r.resource} needs the name of the object to read` });
    if (r.namespace !== undefined && !info.namespaced)
      c.addIssue({ code: 'custom', path: ['namespace'], message: `${r.resource} is not namespaced` });
    if (r.verb === 'get' && r.name && info.namespaced && !r.namespace)
      c.addIssue({ code: 'custom', path: ['namespace'], message: `get ${r.resource} ${r.name} needs its namespace` });
  });

export const Params = z
  .strictObject({
    requests: z
      .array(Request)
      .min(1)
      .max(20)
      .meta({
        description:
          'the requests, each `{verb, resource, namespace?, name?, weight?}`, sent in proportion to their weights (default 1): reads of any ' +
          `object; writes (create, update, patch) only of configmaps or leases, and only of the one the action creates in ${LOAD_NAMESPACE} ` +
          '(create is a dry run: nothing is stored)',
      }),
    qps: z
      .number()
      .min(1)
      .max(2000)
      .meta({ description: 'requests started per second, from 1 to 2000', examples: [50] }),
    concurrency: z.number().int().min(1).max(500).default(20).meta({ description: 'requests unanswered at once, at most (1 to 500)' }),
    userAgent: z
      .string()
      .regex(/^[\x20-\x7e]{1,200}$/, { message: 'expected printable ASCII, 1 to 200 characters' })
      .default('kube-runbook-load')
      .meta({ description: 'the User-Agent header of the requests (what the apiserver logs and audits them as)' }),
    identity: z
      .enum(['run', 'existing'])
      .default('run')
      .meta({
        description:
          `whom the requests are sent as: \`run\`, a ServiceAccount the run creates in ${LOAD_NAMESPACE} with exactly the rights of \`requests\` and removes at revert; ` +
          '`existing`, the ServiceAccount `as` (impersonation), refused in kube-system and when it is bound to a role that may escalate, bind, impersonate or use `*`',
      }),
    as: z
      .string()
      .regex(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\/[a-z0-9]([-.a-z0-9]{0,251}[a-z0-9])?$/, {
        message: 'expected a ServiceAccount as namespace/name',
      })
      .optional()
      .meta({
        description:
          'with `identity: existing`: the ServiceAccount `namespace/name` the requests are sent as (impersonation), so API Priority and Fairness classifies them by the FlowSchema that matches it; it needs the rights its requests use',
        examples: ['monitoring/prometheus'],
      }),
    from: z
      .enum(['executor', 'nodes'])
      .default('executor')
      .meta({
        description:
          'where the load is sent from: `executor`, the executor process (stops with it); `nodes`, each node of `nodes` (required then) ' +
          'with curl, `qps` and `concurrency` split evenly across them, so the apiserver sees it come from the nodes as kubelets',
      }),
  })
  .superRefine((p, c) => {
    if (p.identity === 'existing' && !p.as)
      c.addIssue({ code: 'custom', path: ['identity'], message: 'identity existing needs as: the ServiceAccount as namespace/name' });
    if (p.as && p.identity !== 'existing')
      c.addIssue({
        code: 'custom',
        path: ['as'],
        message: `as impersonates an existing ServiceAccount: add identity: existing to mean it, or leave as out and the run creates the load's identity`,
      });
    if (p.as?.startsWith('kube-system/'))
      c.addIssue({
        code: 'custom',
        path: ['as'],
        message: "never kube-system's ServiceAccounts: they run the cluster's controllers, and several may grant themselves anything",
      });
  });
export type Params = z.output<typeof Params>;

export type State = {
  /** Whose task the load is in this process (ExecutorTasks); with `from: nodes`, the name of its directory on the node. */
  key: string;
  /** `from: nodes`: the node that sends this share, and its directory there; absent (older journals) or null: the executor. */
  node?: string | null;
  dir?: string | null;
  /** `from: nodes`: how long the load runs at most on the node, from its start (the fault's ttl). */
  seconds?: number;
  /** The ServiceAccount `namespace/name` the load is sent as. */
  as: string;
  /**
   * The identity the run made for the load (absent: an existing ServiceAccount, `as`). The nodes of one step share it,
   * and each one's revert removes it: a node reverted later loses its token a moment before its load is stopped, and
   * no order of applies and reverts (one failing half way) leaves it behind.
   */
  identity?: IdentityRef | null;
  userAgent: string;
  qps: number;
  concurrency: number;
  requests: LoadRequest[];
  own: OwnObjects;
};

/** What the load is, where it runs and how it stops: for plans, reports and the apply's log. */
export function describeLoad(
  p: Pick<Params, 'qps' | 'concurrency' | 'userAgent'> & {
    as?: string;
    identity?: string | IdentityRef | null;
    from?: string;
    node?: string | null;
    requests: readonly { verb: LoadVerb; resource: LoadResource; namespace?: string | null; name?: string | null; weight: number }[];
  },
): string {
  const total = p.requests.reduce((n, r) => n + r.weight, 0);
  const mix = p.requests
    .map((r) => {
      const what = r.name
        ? `${r.resource} ${r.namespace ? `${r.namespace}/` : ''}${r.name}`
        : isWritable(r.resource) && r.verb !== 'list'
          ? `its own ${r.resource} in ${LOAD_NAMESPACE}`
          : `${r.resource}${r.namespace ? ` in ${r.namespace}` : ''}`;
      return `${Math.round((100 * r.weight) / total)}% ${r.verb} ${what}${r.verb === 'create' ? ' (dry run)' : ''}`;
    })
    .join(', ');
  const fromNodes = p.from === 'nodes' || !!p.node;
  const made = p.identity === 'existing' || (p.identity == null && p.as) ? null : runIdentity(p.requests, fromNodes);
  const who = made
    ? `a ServiceAccount the run creates and removes, ${LOAD_NAMESPACE}/${made.name}, that may only ${describeRules(made.rules)}`
    : p.as;
  if (fromNodes)
    return (
      `${p.qps} requests/s (at most ${p.concurrency} at once) ${p.node ? `from ${p.node}` : 'split across the nodes'} as ${who} ` +
      `(User-Agent ${quote(p.userAgent)}): ${mix}; stops on revert, when the run ends, by the node's dead-man faultTtl after the run is gone, ` +
      "and by itself faultTtl after the run's maxDuration"
    );
  return (
    `${p.qps} requests/s (at most ${p.concurrency} at once) from the executor as ${who} (User-Agent ${quote(p.userAgent)}): ${mix}; ` +
    'stops on revert, when the run stops, and with the executor process'
  );
}

/** A node's share of the load: qps and concurrency split evenly across the `nodes` nodes. */
export function share(p: Pick<Params, 'qps' | 'concurrency'>, nodes: number, node: string): { qps: number; concurrency: number } {
  const concurrency = Math.floor(p.concurrency / nodes);
  if (concurrency < 1)
    throw new KrError(
      'LOAD_TOO_NARROW',
      `load-apiserver: concurrency ${p.concurrency} is split across ${nodes} nodes, less than one request at once for ${node}: ` +
        `raise concurrency to ${nodes} or more, or select fewer nodes`,
      { exit: EXIT.invalid },
    );
  return { qps: p.qps / nodes, concurrency };
}
