import { z } from 'zod';
import type { ActionCtx } from '../contract/context.js';
import { defineAction } from '../contract/action.js';
import { EXIT, KrError, quote } from '../core/errors.js';
import { formatDuration } from '../core/duration.js';
import { ApiStatusError } from '../kube/source.js';
import type { KubeAccess } from '../kube/types.js';
import {
  LOAD_NAMESPACE,
  LOAD_RESOURCES,
  type LoadRequest,
  type LoadResource,
  type OwnObjects,
  type Writable,
  WRITE_VERBS,
  callFor,
  collectionPath,
  isWritable,
  objectPath,
  ownObject,
  runLoad,
  send,
} from './parts/api-load.js';
import { nodeLoadCheckScript, nodeLoadDir, nodeLoadStartScript, nodeLoadStopScript } from './parts/node-load.js';
import { runOnNode, targetNode } from '../nodes/services/index.js';

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-.a-z0-9]{0,251}[a-z0-9])?$/;
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

const Params = z.strictObject({
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
  qps: z.number().min(1).max(2000).meta({ description: 'requests started per second, from 1 to 2000' }),
  concurrency: z.number().int().min(1).max(500).default(20).meta({ description: 'requests unanswered at once, at most (1 to 500)' }),
  userAgent: z
    .string()
    .regex(/^[\x20-\x7e]{1,200}$/, { message: 'expected printable ASCII, 1 to 200 characters' })
    .default('kube-runbook-load')
    .meta({ description: 'the User-Agent header of the requests (what the apiserver logs and audits them as)' }),
  as: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\/[a-z0-9]([-.a-z0-9]{0,251}[a-z0-9])?$/, {
      message: 'expected a ServiceAccount as namespace/name',
    })
    .meta({
      description:
        'the ServiceAccount `namespace/name` the requests are sent as (impersonation), so API Priority and Fairness classifies them by the FlowSchema that matches it; it needs the rights its requests use',
    }),
  from: z
    .enum(['executor', 'nodes'])
    .default('executor')
    .meta({
      description:
        'where the load is sent from: `executor`, the executor process (stops with it); `nodes`, each node of `nodes` (required then) ' +
        'with curl, `qps` and `concurrency` split evenly across them, so the apiserver sees it come from the nodes as kubelets',
    }),
});
type Params = z.output<typeof Params>;

type State = {
  /** Whose task the load is in this process (ExecutorTasks); with `from: nodes`, the name of its directory on the node. */
  key: string;
  /** `from: nodes`: the node that sends this share, and its directory there; absent (older journals) or null: the executor. */
  node?: string | null;
  dir?: string | null;
  /** `from: nodes`: how long the load runs at most on the node, from its start (the fault's ttl). */
  seconds?: number;
  as: string;
  userAgent: string;
  qps: number;
  concurrency: number;
  requests: LoadRequest[];
  own: OwnObjects;
};

/** A bounded load of requests on the apiserver, as one ServiceAccount: incident 002's overloaded masters. */
export default defineAction({
  meta: {
    id: 'load-apiserver',
    summary:
      'Send a bounded load of API requests as a ServiceAccount, from the executor or from the nodes: an overloaded apiserver (incident 3).',
    description:
      'Sends `qps` requests a second, at most `concurrency` unanswered at once, from the executor process: the `requests` mixed by ' +
      'weight, sent as the ServiceAccount `as` (impersonation headers) with the User-Agent `userAgent`, so that API Priority and ' +
      "Fairness classifies them by the FlowSchema that matches that ServiceAccount, as it would the real culprit's (liveness probes " +
      'reading pods and writing status every 10 s on every node, incident 3). The `apiserver-load` probe shows it: requests ' +
      'executing, queued and rejected for that priority level. Writes reach only what the action creates in its own namespace ' +
      `\`${LOAD_NAMESPACE}\` (a ConfigMap, a Lease; creates are dry runs), never a user's object. Before the load starts, apply ` +
      'sends each request once and refuses when the apiserver does not allow it. The load stops when the action is reverted, ' +
      'when the run is stopped at once, and with the executor process (a SIGKILL stops it at once); it runs on no node, so it ' +
      'needs no dead-man. Sending as a ServiceAccount by impersonation needs no token: nothing secret is created, held or ' +
      'logged, and nothing stays valid after the executor is gone. ' +
      'With `from: nodes` each node of `nodes` sends its share instead, so the apiserver sees the requests come from the ' +
      "nodes' addresses, as it saw the kubelets': `qps` and `concurrency` are split evenly across the nodes (each node " +
      '`qps`/N requests a second, `concurrency`/N rounded down at once: preflight refuses fewer than one), sent by curl (7.84 or ' +
      'newer, for `--rate`; preflight names a node without it) with a token of the ServiceAccount that the executor gets from ' +
      'the TokenRequest API for as long as the load may last (at least 10 minutes, the least the API gives) and hands to the node on the ' +
      "script's input, never on a command line nor in a log; the node keeps it in a file only root reads and removes it when " +
      'the load ends. Each node is a fault of its own, armed with the node-side dead-man before the load starts: the load ' +
      'stops when reverted, when the run ends, and on every node `faultTtl` after the run is gone (executor killed, node cut ' +
      'off); it also ends by itself, whatever happens, `faultTtl` after the latest end of the run (`spec.safety.maxDuration`). ' +
      'Request weights are kept to within 1/200 on the nodes.',
    params: Params,
    targets: 'cluster',
    nodesWhen: { param: 'from', equals: 'nodes' },
    kind: 'fault',
    layouts: {
      kubeadm: 'requests to the apiserver of the kubeconfig (through its load balancer, if it names one)',
      k3s: "requests to the k3s server's apiserver of the kubeconfig",
      lab: "requests to the lab's apiserver (through HAProxy with several control planes); `from: nodes`: from each node's network namespace, with the host's curl",
    },
    undo:
      `stops the load (requests in flight are cancelled) and deletes the objects it created in \`${LOAD_NAMESPACE}\`; the empty namespace stays, ` +
      'for the next run and for the Role `manifests` grants there. `recover` in a new process deletes the objects: the load ended with the process that ran it. ' +
      "`from: nodes`: kills the node's load (its process group) and removes its files, the token with them; the node-side dead-man runs the same script",
    access: [
      {
        apiGroup: '',
        resource: 'serviceaccounts',
        verbs: ['impersonate'],
        namespace: { param: 'as' },
        name: { param: 'as' },
        why: 'sends the load as that ServiceAccount (impersonation), and as no one else',
      },
      {
        apiGroup: '',
        resource: 'serviceaccounts/token',
        verbs: ['create'],
        namespace: { param: 'as' },
        name: { param: 'as' },
        onlyIf: { param: 'from', equals: 'nodes' },
        why: 'gets a short-lived token of that ServiceAccount (TokenRequest) for the nodes to send the load with',
      },
      { apiGroup: '', resource: 'namespaces', verbs: ['create'], why: `creates its namespace ${LOAD_NAMESPACE} when missing` },
      { apiGroup: '', resource: 'namespaces', verbs: ['get'], name: LOAD_NAMESPACE, why: `reads its namespace ${LOAD_NAMESPACE}` },
      {
        apiGroup: '',
        resource: 'configmaps',
        verbs: ['create', 'delete'],
        namespace: LOAD_NAMESPACE,
        why: 'creates the ConfigMap its writes reach, and deletes it',
      },
      {
        apiGroup: 'coordination.k8s.io',
        resource: 'leases',
        verbs: ['create', 'delete'],
        namespace: LOAD_NAMESPACE,
        why: 'creates the Lease its writes reach, and deletes it',
      },
    ],
  },

  async preflight(ctx, params) {
    if (params.from !== 'nodes') return;
    const node = targetNode(ctx, 'load-apiserver');
    share(params, ctx.selection?.length ?? 1, node.name);
    await runOnNode(ctx, node.name, nodeLoadCheckScript(), {
      code: 'PREFLIGHT_FAILED',
      message: 'load-apiserver: this node cannot send the load',
      timeoutMs: 30_000,
    });
  },

  prepare(ctx, params): Promise<State> {
    const onNode = params.from === 'nodes' ? targetNode(ctx, 'load-apiserver').name : null;
    const suffix = `${ctx.runId}-${ctx.clock.now().toString(36)}${onNode ? `-${onNode}` : ''}`
      .toLowerCase()
      .replace(/[^a-z0-9-]/g, '-')
      .slice(-40)
      .replace(/^-+/, '');
    const own: OwnObjects = {};
    for (const r of params.requests)
      if (isWritable(r.resource) && (r.verb !== 'get' || !r.name)) own[r.resource] = `load-${suffix}`.replace(/-+$/, '');
    const requests = params.requests.map((r) => ({ ...r, namespace: r.namespace ?? null, name: r.name ?? null }));
    const common = { as: params.as, userAgent: params.userAgent, requests, own };
    if (!onNode)
      return Promise.resolve({ key: `load-apiserver/${ctx.runId}/${suffix}`, ...common, qps: params.qps, concurrency: params.concurrency });
    if (!ctx.faultTtlMs)
      throw new KrError('LOAD_NOWHERE', 'load-apiserver: a load from nodes runs only in a run (it ends by itself faultTtl after the run)');
    const key = `load-${suffix}`.replace(/[^a-z0-9.-]/g, '-').slice(-100);
    return Promise.resolve({
      key,
      node: onNode,
      dir: nodeLoadDir(ctx.runId, key),
      // past the run's end plus faultTtl the run has reverted it or the node's dead-man has: the load's own bound
      seconds: Math.max(1, Math.ceil(((ctx.runEndsBy ?? ctx.clock.now()) - ctx.clock.now() + ctx.faultTtlMs) / 1000)),
      ...common,
      ...share(params, ctx.selection?.length ?? 1, onNode),
    });
  },

  async apply(ctx, state) {
    const kube = load(ctx);
    const tasks = ctx.tasks;
    if (!tasks && !state.node) throw new KrError('LOAD_NOWHERE', 'load-apiserver: this process runs no load (only a run does)');
    await ensureNamespace(ctx, kube);
    for (const [resource, name] of Object.entries(state.own) as [Writable, string][]) {
      const body = ownObject(resource, name, ctx.runId, ctx.clock.now());
      await kube.json!(collectionPath(resource, LOAD_NAMESPACE), { method: 'POST', body, timeoutMs: 10_000 }).catch((e: unknown) => {
        if (!(e instanceof ApiStatusError && e.status === 409)) throw e;
      });
    }
    const plan = { ...state, headers: headersOf(state), runId: ctx.runId };
    // each request once, before the load: one the apiserver refuses (the ServiceAccount lacks the right, the object is
    // missing) fails the apply instead of making a load of errors
    for (const r of state.requests) {
      const status = await send(kube, plan, r, ctx.clock, ctx.signal);
      if (status < 200 || status > 299)
        throw new KrError(
          'LOAD_REFUSED',
          `load-apiserver: ${r.verb} ${callFor(r, state.own, ctx.runId, 0).path} as ${state.as} answered ${status} ` +
            (status === 403 ? `(grant ${state.as} the right, and the executor impersonate on it)` : ''),
        );
    }
    if (state.node) {
      await startOnNode(ctx, kube, state);
      return state;
    }
    const startedAt = ctx.clock.now();
    tasks!.start(state.key, async (signal) => {
      const counts = await runLoad(kube, plan, ctx.clock, ctx.log, signal);
      const total = Object.values(counts).reduce((n, c) => n + c, 0);
      const by = Object.entries(counts)
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([k, n]) => `${k} ${n}`)
        .join(', ');
      ctx.log.info(
        `load-apiserver: ${total} requests in ${formatDuration(ctx.clock.now() - startedAt)} as ${state.as} (${by || 'none answered'})`,
      );
    });
    ctx.log.info(`load-apiserver: ${describeLoad(state)}`);
    return state;
  },

  async revert(ctx, state) {
    if (state.node && state.dir) {
      const r = await runOnNode(ctx, state.node, nodeLoadStopScript(state.dir), {
        code: 'LOAD_STOP_FAILED',
        message: 'load-apiserver: cannot stop the load',
        timeoutMs: 30_000,
      });
      const answers = /^answers (.*)$/m.exec(r.stdout)?.[1];
      if (answers) ctx.log.info(`load-apiserver: ${state.node} got ${answers.replace(/=/g, ': ')}`);
    } else await ctx.tasks?.stop(state.key);
    const kube = load(ctx);
    for (const [resource, name] of Object.entries(state.own) as [Writable, string][])
      await kube.json!(objectPath(resource, LOAD_NAMESPACE, name), { method: 'DELETE', timeoutMs: 10_000 }).catch((e: unknown) => {
        if (!(e instanceof ApiStatusError && e.status === 404)) throw e;
      });
  },

  // from the executor it runs on no node: the load ends with the executor process; from a node, the node kills it
  nodeSideRevert: (state) => (state.node && state.dir ? nodeLoadStopScript(state.dir) : undefined),

  describe: (p) => describeLoad(p),
});

/** The cluster access a load needs (createKubeAccess sets both). */
function load(ctx: ActionCtx): KubeAccess {
  const kube = ctx.kube;
  if (!kube.request || !kube.json) throw new KrError('KUBE_UNAVAILABLE', 'load-apiserver: this cluster access cannot send requests');
  return kube;
}

function headersOf(s: { as: string; userAgent: string }): Record<string, string> {
  const [namespace, name] = s.as.split('/');
  return { 'User-Agent': s.userAgent, 'Impersonate-User': `system:serviceaccount:${namespace}:${name}` };
}

/** Creates LOAD_NAMESPACE when missing; refuses one being deleted. */
async function ensureNamespace(ctx: ActionCtx, kube: KubeAccess): Promise<void> {
  const r = await kube.request!(`/api/v1/namespaces/${LOAD_NAMESPACE}`, { timeoutMs: 10_000, signal: ctx.signal });
  if (r.status === 200) {
    const ns = JSON.parse(r.body) as { metadata?: { deletionTimestamp?: string } };
    if (ns.metadata?.deletionTimestamp)
      throw new KrError(
        'LOAD_NAMESPACE_TERMINATING',
        `load-apiserver: the namespace ${LOAD_NAMESPACE} is being deleted; try again when it is gone`,
      );
    return;
  }
  if (r.status !== 404)
    throw new KrError('LOAD_NAMESPACE', `load-apiserver: cannot read the namespace ${LOAD_NAMESPACE}: ${r.status} ${quote(r.body, 200)}`);
  const body = {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name: LOAD_NAMESPACE, labels: { 'app.kubernetes.io/managed-by': 'kube-runbook' } },
  };
  await kube.json!('/api/v1/namespaces', { method: 'POST', body, timeoutMs: 10_000 }).catch((e: unknown) => {
    if (!(e instanceof ApiStatusError && e.status === 409)) throw e;
  });
}

/** What the load is, where it runs and how it stops: for plans, reports and the apply's log. */
function describeLoad(
  p: Pick<Params, 'qps' | 'concurrency' | 'as' | 'userAgent'> & {
    from?: string;
    node?: string | null;
    requests: readonly { verb: string; resource: LoadResource; namespace?: string | null; name?: string | null; weight: number }[];
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
  if (p.from === 'nodes' || p.node)
    return (
      `${p.qps} requests/s (at most ${p.concurrency} at once) ${p.node ? `from ${p.node}` : 'split across the nodes'} as ${p.as} ` +
      `(User-Agent ${quote(p.userAgent)}): ${mix}; stops on revert, when the run ends, by the node's dead-man faultTtl after the run is gone, ` +
      "and by itself faultTtl after the run's maxDuration"
    );
  return (
    `${p.qps} requests/s (at most ${p.concurrency} at once) from the executor as ${p.as} (User-Agent ${quote(p.userAgent)}): ${mix}; ` +
    'stops on revert, when the run stops, and with the executor process'
  );
}

/** A node's share of the load: qps and concurrency split evenly across the `nodes` nodes. */
function share(p: Pick<Params, 'qps' | 'concurrency'>, nodes: number, node: string): { qps: number; concurrency: number } {
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

/**
 * Starts a node's share: a token for the ServiceAccount from the TokenRequest API (valid for the fault's ttl and a
 * minute, at least the 10 minutes the API allows), handed to the node on the script's input, never in its text.
 */
async function startOnNode(ctx: ActionCtx, kube: KubeAccess, state: State): Promise<void> {
  const [namespace, name] = state.as.split('/') as [string, string];
  const seconds = state.seconds ?? 60;
  const review = await kube.json!<{ status?: { token?: string } }>(
    `/api/v1/namespaces/${encodeURIComponent(namespace)}/serviceaccounts/${encodeURIComponent(name)}/token`,
    {
      method: 'POST',
      body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: Math.max(600, seconds + 60) } },
      timeoutMs: 10_000,
    },
  );
  const token = review.status?.token;
  if (!token || /[\s]/.test(token))
    throw new KrError('LOAD_NO_TOKEN', `load-apiserver: the TokenRequest for ${state.as} returned no token`);
  const credentials = await kube.config.credentials();
  const text = nodeLoadStartScript(
    {
      dir: state.dir!,
      server: kube.server,
      ca: credentials.ca ? credentials.ca.toString('utf8') : null,
      insecure: credentials.insecure,
      userAgent: state.userAgent,
      requests: state.requests,
      own: state.own,
      runId: ctx.runId,
      qps: state.qps,
      concurrency: state.concurrency,
      seconds,
    },
    ctx.clock.now(),
  );
  const r = await ctx.nodes.exec(state.node!, text, { timeoutMs: 30_000, signal: ctx.signal, input: `Authorization: Bearer ${token}\n` });
  if (r.code !== 0)
    throw new KrError(
      'LOAD_START_FAILED',
      `load-apiserver: cannot start the load on ${state.node} (exit ${r.code}): ${quote(r.stderr.trim() || r.stdout.trim(), 300)}`,
    );
  ctx.log.info(`load-apiserver: ${state.node}: ${describeLoad(state)}`);
}
