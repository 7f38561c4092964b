import type { ActionCtx } from '../../contract/context.js';
import { KrError, quote } from '../../core/errors.js';
import { ApiStatusError } from '../../kube/source.js';
import type { KubeAccess } from '../../kube/types.js';
import { LOAD_NAMESPACE, LOAD_RESOURCES, type Writable } from './api-load.js';
import { nodeLoadStartScript } from './node-load.js';
import { type State, describeLoad } from './load-params.js';

/** What load-apiserver asks of the cluster around its load: the namespace, the identity's grants, a node's start. */
/**
 * Waits (10 s at most) until the apiserver's authorizer has taken in the identity's new Roles, asking it by
 * SelfSubjectAccessReviews as the identity (which anyone may make), so that the load's requests are not sent to be
 * refused meanwhile: they would count in the load's priority level as the load does.
 */
export async function untilGranted(ctx: ActionCtx, kube: KubeAccess, state: State): Promise<void> {
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
export function load(ctx: ActionCtx): KubeAccess {
  const kube = ctx.kube;
  if (!kube.request || !kube.json) throw new KrError('KUBE_UNAVAILABLE', 'load-apiserver: this cluster access cannot send requests');
  return kube;
}

export function headersOf(s: { as: string; userAgent: string }): Record<string, string> {
  const [namespace, name] = s.as.split('/');
  return { 'User-Agent': s.userAgent, 'Impersonate-User': `system:serviceaccount:${namespace}:${name}` };
}

/** Creates LOAD_NAMESPACE when missing; refuses one being deleted. */
export async function ensureNamespace(ctx: ActionCtx, kube: KubeAccess): Promise<void> {
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

/**
 * Starts a node's share: a token for the ServiceAccount from the TokenRequest API, handed to the node on the script's
 * input, never in its text. The token is for the apiserver's own audiences (none asked: the API gives those), valid for
 * the fault's ttl and a minute (the API gives no less than 10 minutes), and, for the run's identity, bound to its Secret:
 * deleting it at revert (or the ServiceAccount) revokes the token.
 */
export async function startOnNode(ctx: ActionCtx, kube: KubeAccess, state: State, secretUid: string | undefined): Promise<void> {
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
