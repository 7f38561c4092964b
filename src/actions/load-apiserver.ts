import { defineAction } from '../contract/action.js';
import { KrError } from '../core/errors.js';
import { formatDuration } from '../core/duration.js';
import { retrying } from '../core/retry.js';
import { ApiStatusError } from '../kube/source.js';
import {
  LOAD_NAMESPACE,
  type OwnObjects,
  type Writable,
  callFor,
  collectionPath,
  isWritable,
  objectPath,
  ownObject,
  runLoad,
  send,
} from './parts/api-load.js';
import { nodeLoadCheckScript, nodeLoadDir, nodeLoadStopScript } from './parts/node-load.js';
import { createIdentity, refOf, removeCommand, removeIdentity, runIdentity } from './parts/load-identity.js';
import { refuseDangerousAccount } from './parts/load-existing.js';
import { Params, type State, describeLoad, share } from './parts/load-params.js';
import { ensureNamespace, headersOf, load, startOnNode, untilGranted } from './parts/load-cluster.js';
import { existingTokenAccess, identityDeclarations } from './parts/load-access.js';
import { runOnNode, targetNode } from '../nodes/services/index.js';

/** How long an apply keeps trying to create the load's identity through a struggling apiserver. */
const IDENTITY_CREATE_MS = 60_000;

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
