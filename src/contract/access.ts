import type { AccessCheck } from '../kube/types.js';

/** The Kubernetes API verbs a module may declare; never `*`. */
export type ApiVerb = 'get' | 'list' | 'watch' | 'create' | 'update' | 'patch' | 'delete' | 'impersonate';

/**
 * One API permission a module needs, in its `meta.access`. The same declaration makes the preflight RBAC check
 * (src/engine/access.ts) and the least-privilege ClusterRole of `kube-runbook manifests`, so the two never disagree.
 */
export type ApiAccess = ResourceAccess | NonResourceAccess;

export interface ResourceAccess {
  /** '' for the core group. */
  apiGroup: string;
  resource: string;
  verbs: readonly ApiVerb[];
  /**
   * Absent: cluster-wide (a cluster-scoped resource, or every namespace). A string: that namespace only.
   * `{ param }`: the namespace part of that `namespace/name` parameter (of each, for a list of them).
   */
  namespace?: string | { param: string };
  /** One object only (RBAC resourceNames): that name, or `{ param }`, the name part of that `namespace/name` parameter. */
  name?: string | { param: string };
  /** Needed only when that parameter has that value (e.g. endpoints-stability's `kind`). */
  onlyIf?: { param: string; equals: string };
  /**
   * The group and resource come from these `apiVersion` and `kind` parameters (kubernetes-object); `apiGroup` and
   * `resource` then only describe it in the docs. The resource is named as kubectl guesses a kind's plural
   * (`guessResource`); a custom resource with an irregular plural needs its rule adjusted by hand.
   */
  of?: { apiVersion: string; kind: string };
  /**
   * The permissions follow from the params in a way the fields above cannot say (load-apiserver's identity, from its
   * request mix): `derive` gives them, and `apiGroup`, `resource`, `verbs` and `where` only describe them in the docs.
   */
  derive?: (params: Record<string, unknown>) => ResolvedAccess[];
  /** With `derive`: where the permissions apply, for the docs. */
  where?: string;
  /** Why, for docs/actions.md and docs/probes.md. */
  why: string;
}

export interface NonResourceAccess {
  /** A path such as /readyz (granted to every client by Kubernetes' default system:public-info-viewer role). */
  nonResourceURL: string;
  verbs: readonly ['get'];
  why: string;
}

/** A permission with its namespace resolved against a module's params: what is checked and granted. */
export type ResolvedAccess =
  | {
      apiGroup: string;
      resource: string;
      verbs: readonly ApiVerb[];
      namespace?: string;
      /** one object only (RBAC resourceNames) */ name?: string;
    }
  | { nonResourceURL: string; verbs: readonly ['get'] };

/** The permissions a module needs with these params. */
export function resolveAccess(declared: readonly ApiAccess[], params: Record<string, unknown>): ResolvedAccess[] {
  const out: ResolvedAccess[] = [];
  for (const a of declared) {
    if ('nonResourceURL' in a) {
      out.push({ nonResourceURL: a.nonResourceURL, verbs: a.verbs });
      continue;
    }
    if (a.onlyIf && String(params[a.onlyIf.param]) !== a.onlyIf.equals) continue;
    if (a.derive) {
      out.push(...a.derive(params));
      continue;
    }
    const apiVersion = a.of ? String(params[a.of.apiVersion] ?? '') : '';
    const apiGroup = a.of ? (apiVersion.includes('/') ? apiVersion.split('/')[0]! : '') : a.apiGroup;
    const resource = a.of ? guessResource(String(params[a.of.kind] ?? '')) : a.resource;
    const name = typeof a.name === 'object' ? String(params[a.name.param] ?? '').split('/')[1] : a.name;
    for (const namespace of namespacesOf(a, params))
      out.push({ apiGroup, resource, verbs: a.verbs, ...(namespace ? { namespace } : {}), ...(name ? { name } : {}) });
  }
  return out;
}

/** The namespaces a permission is needed in: its own, or that of each `namespace/name` its parameter gives. */
function namespacesOf(a: ResourceAccess, params: Record<string, unknown>): (string | undefined)[] {
  if (typeof a.namespace !== 'object') return [a.namespace];
  const given = params[a.namespace.param];
  const names = (Array.isArray(given) ? given : [given]).map((v) => String(v ?? '').split('/')[0]);
  return [...new Set(names)];
}

/** A kind's resource name as kubectl guesses it: lower case, plural by English rules (Ingress → ingresses, NetworkPolicy → networkpolicies). */
function guessResource(kind: string): string {
  const k = kind.toLowerCase();
  if (!k) return k;
  if (/(s|x|z|ch|sh)$/.test(k)) return `${k}es`;
  if (/[^aeiou]y$/.test(k)) return `${k.slice(0, -1)}ies`;
  return `${k}s`;
}

/** One SelfSubjectAccessReview per verb. */
export function accessChecks(access: readonly ResolvedAccess[]): AccessCheck[] {
  return access.flatMap((a): AccessCheck[] =>
    'nonResourceURL' in a
      ? a.verbs.map((verb) => ({ verb, path: a.nonResourceURL }))
      : a.verbs.map((verb) => ({
          verb,
          resource: a.resource,
          ...(a.apiGroup ? { group: a.apiGroup } : {}),
          ...(a.namespace ? { namespace: a.namespace } : {}),
          ...(a.name ? { name: a.name } : {}),
        })),
  );
}

/** `list pods`, `watch leases.coordination.k8s.io in kube-node-lease`, `get /readyz`: how a permission is named to a person. */
export function describeCheck(c: AccessCheck): string {
  if (c.path) return `${c.verb} ${c.path}`;
  return `${c.verb} ${c.group ? `${c.resource}.${c.group}` : c.resource}${c.name ? ` ${c.name}` : ''}${c.namespace ? ` in ${c.namespace}` : ' (cluster-wide)'}`;
}

/**
 * A list+watch permission, what a watching probe declares: cluster-wide unless `scope` gives a namespace (or the
 * parameter naming it), and needed only for the parameter value `scope.onlyIf` says.
 */
export function watches(
  apiGroup: string,
  resource: string,
  why: string,
  scope: Pick<ResourceAccess, 'namespace' | 'onlyIf'> = {},
): ResourceAccess {
  return { apiGroup, resource, verbs: ['list', 'watch'], ...scope, why };
}

/** The list+watch of the leader-election Lease(s) that the `namespace/name` parameter `param` names. */
export function watchesLeaderLeases(param: string, why: string): ResourceAccess {
  return watches('coordination.k8s.io', 'leases', why, { namespace: { param } });
}

/** Declarations several modules share. */
export const READ_NODES = watches('', 'nodes', "watches the cluster's Nodes");
export const READ_PODS = watches('', 'pods', 'watches the pods of every namespace');
export const READ_NODE_LEASES = watches('coordination.k8s.io', 'leases', "watches the nodes' heartbeat Leases", {
  namespace: 'kube-node-lease',
});
export const GET_VERSION: NonResourceAccess = { nonResourceURL: '/version', verbs: ['get'], why: "reads the server's version" };
