import { z } from 'zod';
import type { ActionCtx } from '../contract/context.js';
import { defineAction } from '../contract/action.js';
import { EXIT, KrError, quote } from '../core/errors.js';
import { formatDuration } from '../core/duration.js';
import { retrying } from '../core/retry.js';
import { ApiStatusError } from '../kube/source.js';
import type { KubeAccess } from '../kube/types.js';
import {
  LOAD_NAMESPACE,
  LOAD_RESOURCES,
  type LoadRequest,
  type LoadResource,
  type LoadVerb,
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
import {
  type IdentityRef,
  createIdentity,
  describeRules,
  identityAccess,
  refOf,
  removeCommand,
  removeIdentity,
  runIdentity,
} from './parts/load-identity.js';
import { refuseDangerousAccount } from './parts/load-existing.js';
import type { ResolvedAccess, ResourceAccess } from '../contract/access.js';
import { runOnNode, targetNode } from '../nodes/services/index.js';

/** How long an apply keeps trying to create the load's identity through a struggling apiserver. */
const IDENTITY_CREATE_MS = 60_000;

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

const Params = z
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
type Params = z.output<typeof Params>;

type State = {
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

/** A bounded load of requests on the apiserver, as one ServiceAccount: incident 002's overloaded masters. */
export default defineAction({
  meta: {
    id: 'load-apiserver',
    summary:
      'Send a bounded load of API requests as a ServiceAccount, from the executor or from the nodes: an overloaded apiserver (incident 3).',
    description:
      'Sends `qps` requests a second, at most `concurrency` unanswered at once, from the executor process: the `requests` mixed by ' +
      'weight, sent as a ServiceAccount (impersonation headers) with the User-Agent `userAgent`, so that API Priority and ' +
      "Fairness classifies them by the FlowSchema that matches that ServiceAccount, as it would the real culprit's (liveness probes " +
      'reading pods and writing status every 10 s on every node, incident 3). The `apiserver-load` probe shows it: requests ' +
      'executing, queued and rejected for that priority level. ' +
      `By default (\`identity: run\`) the ServiceAccount is one the run creates, \`${LOAD_NAMESPACE}/kube-runbook-load-<hash>\`, granted ` +
      'exactly the verbs and resources of `requests` (a list where it lists, a get of the object it names, the writes of its own ' +
      `objects in \`${LOAD_NAMESPACE}\`) by a ClusterRole and Roles of the same name, all owned by that ClusterRole and deleted at ` +
      'revert; the plan says what it is granted. RBAC lets no one grant what they do not hold, so the executor needs those ' +
      'rights itself (`manifests` grants them). `identity: existing` with `as: namespace/name` sends it as a ServiceAccount the ' +
      "cluster has instead: never one of kube-system's (`validate` refuses it), nor one bound, by name or through its groups, to a " +
      'role that may escalate, bind or impersonate or grants `*` verbs or resources (preflight refuses it, `LOAD_IDENTITY_UNSAFE`). ' +
      `Writes reach only what the action creates in its own namespace \`${LOAD_NAMESPACE}\` (a ConfigMap, a Lease; creates are dry ` +
      "runs), never a user's object. Before the load starts, apply sends each request once and refuses when the apiserver does " +
      'not allow it. The load stops when the action is reverted, when the run is stopped at once, and with the executor process ' +
      '(a SIGKILL stops it at once); it runs on no node, so it needs no dead-man. What the run made for it (the identity, ' +
      "the load's own objects) is deleted by the run's exit watcher when the executor process ends before the revert, a " +
      'SIGKILL included: a process of this tool started beside the executor, in a session of its own, that deletes them ' +
      '(each only while it has the uid it was made with) moments after the executor is gone; if the machine goes down ' +
      'with the executor, `recover` removes them. ' +
      'With `from: nodes` each node of `nodes` sends its share instead, so the apiserver sees the requests come from the ' +
      "nodes' addresses, as it saw the kubelets': `qps` and `concurrency` are split evenly across the nodes (each node " +
      '`qps`/N requests a second, `concurrency`/N rounded down at once: preflight refuses fewer than one), sent by curl (7.84 or ' +
      'newer, for `--rate`; preflight names a node without it) with a token of the ServiceAccount that the executor gets from ' +
      'the TokenRequest API for as long as the load may last (at least 10 minutes, the least the API gives), bound to a Secret ' +
      "of the run's identity that the revert deletes (which revokes it), and hands to the node on the script's input, never on " +
      'a command line nor in a log; the node keeps it in a file only root reads and removes it when the load ends. Each node ' +
      'is a fault of its own, armed with the node-side dead-man before the load starts: the load stops when reverted, when ' +
      'the run ends, and on every node `faultTtl` after the run is gone (executor killed, node cut off), whose dead-man also ' +
      "deletes the run's identity with the token it holds; it also ends by itself, whatever happens, `faultTtl` after the " +
      'latest end of the run (`spec.safety.maxDuration`). Request weights are kept to within 1/200 on the nodes.',
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
      "for the next run and for the Role `manifests` grants there; then the run's identity (its ServiceAccount first, which voids any token of it, " +
      'its bindings, Roles and ClusterRole). `recover` in a new process deletes the same: the load ended with the process that ran it. ' +
      "`from: nodes`: kills the node's load (its process group) and removes its files, the token with them; the node-side dead-man runs the same script",
    access: [
      ...identityDeclarations(),
      {
        apiGroup: '',
        resource: 'serviceaccounts',
        verbs: ['impersonate'],
        namespace: { param: 'as' },
        name: { param: 'as' },
        onlyIf: { param: 'identity', equals: 'existing' },
        why: 'sends the load as that ServiceAccount (impersonation), and as no one else',
      },
      {
        apiGroup: '',
        resource: 'serviceaccounts/token',
        verbs: ['create'],
        where: 'the namespace of `as`, that ServiceAccount only (with `identity: existing` and `from: nodes`)',
        derive: (p) => (p.identity === 'existing' && p.from === 'nodes' ? existingTokenAccess(String(p.as)) : []),
        why: 'gets a short-lived token of that ServiceAccount (TokenRequest) for the nodes to send the load with',
      },
      ...['clusterrolebindings', 'rolebindings', 'clusterroles', 'roles'].map((resource) => ({
        apiGroup: 'rbac.authorization.k8s.io',
        resource,
        verbs: ['list'] as const,
        onlyIf: { param: 'identity', equals: 'existing' },
        why: 'preflight checks that the ServiceAccount `as` is bound to no role that may escalate, bind, impersonate or use `*`',
      })),
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
    const node = params.from === 'nodes' ? targetNode(ctx, 'load-apiserver') : undefined;
    if (node) share(params, ctx.selection?.length ?? 1, node.name);
    // an existing account only when it cannot grow: checked once, on the first node of a load from nodes
    if (params.identity === 'existing' && (!node || !ctx.selection?.length || ctx.selection[0] === node.name))
      await refuseDangerousAccount(load(ctx), params.as!, ctx.signal);
    if (!node) return;
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
    const made = params.identity === 'existing' ? null : runIdentity(requests, onNode !== null);
    const common = {
      as: made ? `${LOAD_NAMESPACE}/${made.name}` : params.as!,
      identity: made ? refOf(made) : null,
      userAgent: params.userAgent,
      requests,
      own,
    };
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
    let secretUid: string | undefined;
    if (state.identity) {
      const id = runIdentity(state.requests, !!state.node);
      if (id.name !== state.identity.name)
        throw new KrError(
          'LOAD_IDENTITY',
          `load-apiserver: the identity ${state.identity.name} of this fault is not what its requests need`,
        );
      // a fault's apply is not retried by the engine, and a loaded apiserver may take more than one request's 10 s:
      // creating the identity again is harmless (a create that finds an object replaces it with the same)
      let anchor: { path: string; uid: string };
      ({ secretUid, anchor } = await retrying(() => createIdentity(kube, id, ctx.runId), {
        clock: ctx.clock,
        signal: ctx.signal,
        deadline: ctx.clock.now() + IDENTITY_CREATE_MS,
        classify: (e) => (e instanceof KrError ? e.transient : undefined),
        onFailure: (f) => f.retryInMs !== undefined && ctx.log.warn(`load-apiserver: ${f.error}; trying again in ${f.retryInMs} ms`),
      }));
      // from the executor: if it is killed, its exit watcher deletes the identity (the ClusterRole, and the rest with
      // it); from nodes, the nodes' dead-men do
      if (!state.node)
        tasks?.deleteOnExit?.(state.key, [{ ...anchor, what: `the load's identity (ClusterRole ${id.name} and what it owns)` }]);
    }
    for (const [resource, name] of Object.entries(state.own) as [Writable, string][]) {
      const body = ownObject(resource, name, ctx.runId, ctx.clock.now());
      const made = await kube.json!<{ metadata: { uid: string } }>(collectionPath(resource, LOAD_NAMESPACE), {
        method: 'POST',
        body,
        timeoutMs: 10_000,
      }).catch((e: unknown) => {
        if (!(e instanceof ApiStatusError && e.status === 409)) throw e;
      });
      if (made && !state.node)
        tasks?.deleteOnExit?.(state.key, [
          { path: objectPath(resource, LOAD_NAMESPACE, name), uid: made.metadata.uid, what: `${resource} ${LOAD_NAMESPACE}/${name}` },
        ]);
    }
    const plan = { ...state, headers: headersOf(state), runId: ctx.runId };
    if (state.identity) await untilGranted(ctx, kube, state);
    // each request once, before the load: one the apiserver refuses (the ServiceAccount lacks the right, the object is
    // missing) fails the apply instead of making a load of errors
    for (const r of state.requests) {
      let status = await send(kube, plan, r, ctx.clock, ctx.signal);
      // an apiserver other than the one that answered the reviews may take the Role in a moment later
      for (let waited = 0; state.identity && status === 403 && waited < 10_000; waited += 250) {
        await ctx.clock.sleep(250, ctx.signal);
        status = await send(kube, plan, r, ctx.clock, ctx.signal);
      }
      if (status < 200 || status > 299)
        throw new KrError(
          'LOAD_REFUSED',
          `load-apiserver: ${r.verb} ${callFor(r, state.own, ctx.runId, 0).path} as ${state.as} answered ${status} ` +
            (status === 403
              ? state.identity
                ? "(the apiserver did not take in the load's Role)"
                : `(grant ${state.as} the right, and the executor impersonate on it)`
              : ''),
        );
    }
    if (state.node) {
      await startOnNode(ctx, kube, state, secretUid);
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
    if (state.identity) {
      // a failure the apiserver may get over (restarting, overloaded) is transient: the engine reverts again until
      // the rollback's deadline, and only then says what is left
      const { left, transient } = await removeIdentity(kube, state.identity);
      if (left.length)
        throw new KrError(
          'LOAD_IDENTITY_LEFT',
          `load-apiserver: the load's identity ${LOAD_NAMESPACE}/${state.identity.name} is not all removed (${left.join('; ')}); ` +
            `remove it with: ${removeCommand(state.identity)}`,
          { transient },
        );
    }
    ctx.tasks?.forgetOnExit?.(state.key);
  },

  // from the executor it runs on no node: the load ends with the executor process; from a node, the node kills it, and
  // its dead-man also deletes the run's identity (no executor is left to), with the token it holds
  nodeSideRevert: (state) => (state.node && state.dir ? nodeLoadStopScript(state.dir, !!state.identity) : undefined),

  describe: (p) => describeLoad(p),
});

/**
 * Waits (10 s at most) until the apiserver's authorizer has taken in the identity's new Roles, asking it by
 * SelfSubjectAccessReviews as the identity (which anyone may make), so that the load's requests are not sent to be
 * refused meanwhile: they would count in the load's priority level as the load does.
 */
async function untilGranted(ctx: ActionCtx, kube: KubeAccess, state: State): Promise<void> {
  const headers = headersOf(state);
  for (const r of state.requests) {
    const [resource, subresource] = r.resource.split('/') as [string, string | undefined];
    const base: string = LOAD_RESOURCES[r.resource].base;
    const own = !r.name && r.verb !== 'list';
    const attributes = {
      verb: r.verb,
      group: base === '/api/v1' ? '' : base.split('/')[2],
      resource,
      ...(subresource ? { subresource } : {}),
      ...(own ? { namespace: LOAD_NAMESPACE } : r.namespace ? { namespace: r.namespace } : {}),
      ...(r.name ? { name: r.name } : own && r.verb !== 'create' ? { name: state.own[r.resource as Writable] } : {}),
    };
    const body = { apiVersion: 'authorization.k8s.io/v1', kind: 'SelfSubjectAccessReview', spec: { resourceAttributes: attributes } };
    for (let waited = 0; waited < 10_000; waited += 250) {
      const a = await kube.request!('/apis/authorization.k8s.io/v1/selfsubjectaccessreviews', {
        method: 'POST',
        body,
        headers,
        timeoutMs: 10_000,
        signal: ctx.signal,
      });
      if (a.status === 201 && (JSON.parse(a.body) as { status?: { allowed?: boolean } }).status?.allowed) break;
      await ctx.clock.sleep(250, ctx.signal);
    }
  }
}

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
 * Starts a node's share: a token for the ServiceAccount from the TokenRequest API, handed to the node on the script's
 * input, never in its text. The token is for the apiserver's own audiences (none asked: the API gives those), valid for
 * the fault's ttl and a minute (the API gives no less than 10 minutes), and, for the run's identity, bound to its Secret:
 * deleting it at revert (or the ServiceAccount) revokes the token.
 */
async function startOnNode(ctx: ActionCtx, kube: KubeAccess, state: State, secretUid: string | undefined): Promise<void> {
  const [namespace, name] = state.as.split('/') as [string, string];
  const seconds = state.seconds ?? 60;
  const bound = state.identity && secretUid ? { boundObjectRef: { apiVersion: 'v1', kind: 'Secret', name, uid: secretUid } } : {};
  const review = await kube.json!<{ status?: { token?: string } }>(
    `/api/v1/namespaces/${encodeURIComponent(namespace)}/serviceaccounts/${encodeURIComponent(name)}/token`,
    {
      method: 'POST',
      body: {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenRequest',
        spec: { expirationSeconds: Math.max(600, seconds + 60), ...bound },
      },
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
      identityPath: state.identity ? `/apis/rbac.authorization.k8s.io/v1/clusterroles/${state.identity.name}` : null,
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

/** The requests of params or a state, as the identity's rules read them. */
const requestsOf = (p: Record<string, unknown>) => (Array.isArray(p.requests) ? p.requests : []) as LoadRequest[];

/** What the executor needs for the identity the run makes (nothing with `identity: existing`), picked by resource. */
function madeAccess(p: Record<string, unknown>, pick: (resource: string) => boolean): ResolvedAccess[] {
  if (p.identity === 'existing') return [];
  const fromNodes = p.from === 'nodes';
  return identityAccess(runIdentity(requestsOf(p), fromNodes), fromNodes).filter((a) => 'resource' in a && pick(a.resource));
}

const IDENTITY_RESOURCES = [
  'serviceaccounts',
  'clusterroles',
  'clusterrolebindings',
  'roles',
  'rolebindings',
  'serviceaccounts/token',
  'secrets',
];

/** meta.access for the identity the run makes: its objects by name, and every right it grants (which it must hold). */
function identityDeclarations(): ResourceAccess[] {
  return [
    {
      apiGroup: '',
      resource: 'serviceaccounts',
      verbs: ['create', 'update', 'delete', 'impersonate'],
      where: `namespace \`${LOAD_NAMESPACE}\`; all but create its own only, by name`,
      derive: (p) => madeAccess(p, (r) => r === 'serviceaccounts'),
      why: "creates the load's ServiceAccount (`identity: run`), sends the load as it (impersonation), and deletes it",
    },
    {
      apiGroup: '',
      resource: 'clusterroles, clusterrolebindings, roles, rolebindings (rbac.authorization.k8s.io)',
      verbs: ['create', 'update', 'delete'],
      where: 'cluster-wide and each namespace `requests` reach; all but create its own only, by name',
      derive: (p) => madeAccess(p, (r) => ['clusterroles', 'clusterrolebindings', 'roles', 'rolebindings'].includes(r)),
      why: "grants the load's ServiceAccount the rights of `requests`, nothing else, and removes the grant",
    },
    {
      apiGroup: '',
      resource: 'serviceaccounts/token, secrets',
      verbs: ['create', 'update', 'delete'],
      where: `namespace \`${LOAD_NAMESPACE}\`, its own by name (create of secrets: any name); with \`from: nodes\``,
      derive: (p) => madeAccess(p, (r) => r === 'serviceaccounts/token' || r === 'secrets'),
      why: "gets the nodes a token of the load's ServiceAccount, bound to a Secret it deletes at revert (which revokes the token)",
    },
    {
      apiGroup: '',
      resource: 'the resources of requests',
      verbs: ['get', 'list', 'create', 'update', 'patch'],
      where: 'as `requests` send them (a get by name, a list where it lists, its own objects in `kr-load`)',
      derive: (p) => madeAccess(p, (r) => !IDENTITY_RESOURCES.includes(r)),
      why: "holds the rights it grants the load's ServiceAccount: RBAC lets no one grant what they do not hold",
    },
  ];
}

const existingTokenAccess = (as: string): ResolvedAccess[] => [
  { apiGroup: '', resource: 'serviceaccounts/token', verbs: ['create'], namespace: as.split('/')[0]!, name: as.split('/')[1]! },
];
