import { createHash } from 'node:crypto';
import type { ResolvedAccess } from '../../contract/access.js';
import { KrError, quote } from '../../core/errors.js';
import { ApiStatusError } from '../../kube/source.js';
import { kubeTransient } from '../../kube/transient.js';
import type { KubeAccess } from '../../kube/types.js';
import { LOAD_NAMESPACE, LOAD_RESOURCES, type LoadRequest, isWritable } from './api-load.js';

/**
 * The identity a load is sent as when the runbook names none: a ServiceAccount the run creates in LOAD_NAMESPACE,
 * granted exactly the verbs and resources of the load's requests and nothing else, and removed at revert.
 *
 * Its objects, all named `kube-runbook-load-<hash of its rules>` (the same rules, the same name: `manifests` can grant
 * their deletion and impersonation by `resourceNames`, and one run at a time holds the cluster's run lock):
 * - a ClusterRole with the cluster-wide rules (maybe none): the anchor every other object is owned by, so that
 *   deleting it deletes them all (garbage collection; a cluster-scoped owner may own cluster-scoped and namespaced
 *   objects alike);
 * - the ServiceAccount, in LOAD_NAMESPACE (no token mounted anywhere);
 * - a ClusterRoleBinding to the ClusterRole, when it has rules;
 * - per namespace its requests read or write in: a Role with those rules and a RoleBinding to it;
 * - `from: nodes`: an empty Secret the nodes' tokens are bound to (deleting it revokes them).
 *
 * RBAC grants only what the granter holds: the executor needs every rule it gives (meta.access says so, from the
 * same `identityRules`), so the identity can never hold more than the executor.
 */
const IDENTITY_PREFIX = 'kube-runbook-load-';
const RBAC = '/apis/rbac.authorization.k8s.io/v1';
const RBAC_GROUP = 'rbac.authorization.k8s.io';

export interface Rule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
  resourceNames?: string[];
}

export interface IdentityRules {
  cluster: Rule[];
  /** Namespace → its rules. */
  namespaced: Record<string, Rule[]>;
}

/** What the revert state keeps of an identity: names only, enough to remove it in a new process. */
export type IdentityRef = {
  name: string;
  /** The namespaces it has a Role and RoleBinding in. */
  namespaces: string[];
  /** Whether it has a ClusterRoleBinding. */
  cluster: boolean;
  tokenSecret: boolean;
};

export const refOf = (id: RunIdentity): IdentityRef => ({
  name: id.name,
  namespaces: Object.keys(id.rules.namespaced),
  cluster: id.rules.cluster.length > 0,
  tokenSecret: id.tokenSecret,
});

export interface RunIdentity {
  /** The name of every object of the identity; the ServiceAccount is LOAD_NAMESPACE/name. */
  name: string;
  rules: IdentityRules;
  /** `from: nodes`: the Secret the tokens are bound to (LOAD_NAMESPACE/name). */
  tokenSecret: boolean;
}

const groupOf = (resource: keyof typeof LOAD_RESOURCES): string => {
  const base: string = LOAD_RESOURCES[resource].base;
  return base === '/api/v1' ? '' : base.split('/')[2]!;
};

type RequestLike = Pick<LoadRequest, 'verb' | 'resource'> & { namespace?: string | null; name?: string | null };

/**
 * The rules the requests need, merged: a list where it lists, a get of the object it names (by name), and the writes
 * (and reads) of its own objects in LOAD_NAMESPACE by verb and resource (their names are drawn per fault).
 * `selfDelete`: the identity may delete its own ClusterRole (the node-side dead-man removes the identity with it).
 */
function identityRules(requests: readonly RequestLike[], selfDelete: string | null = null): IdentityRules {
  const verbs = new Map<string, Set<string>>();
  const add = (scope: string, group: string, resource: string, verb: string, name: string | null) => {
    const key = JSON.stringify([scope, group, resource, name ?? '']);
    const set = verbs.get(key) ?? new Set<string>();
    set.add(verb);
    verbs.set(key, set);
  };
  for (const r of requests) {
    const info = LOAD_RESOURCES[r.resource];
    const group = groupOf(r.resource);
    if (r.verb === 'list') add(info.namespaced && r.namespace ? r.namespace : '', group, r.resource, 'list', null);
    else if (r.verb === 'get' && r.name) add(info.namespaced ? (r.namespace ?? '') : '', group, r.resource, 'get', r.name);
    else if (isWritable(r.resource)) add(LOAD_NAMESPACE, group, r.resource, r.verb, null);
  }
  if (selfDelete) add('', RBAC_GROUP, 'clusterroles', 'delete', selfDelete);
  const out: IdentityRules = { cluster: [], namespaced: {} };
  for (const key of [...verbs.keys()].sort()) {
    const [scope, group, resource, name] = JSON.parse(key) as [string, string, string, string];
    const rule: Rule = {
      apiGroups: [group],
      resources: [resource],
      verbs: [...verbs.get(key)!].sort(),
      ...(name ? { resourceNames: [name] } : {}),
    };
    if (scope) (out.namespaced[scope] ??= []).push(rule);
    else out.cluster.push(rule);
  }
  return out;
}

/** The identity a load with these requests is sent as: its name follows from its rules. */
export function runIdentity(requests: readonly RequestLike[], fromNodes: boolean): RunIdentity {
  const base = identityRules(requests);
  const name = `${IDENTITY_PREFIX}${createHash('sha256')
    .update(JSON.stringify([base, fromNodes]))
    .digest('hex')
    .slice(0, 10)}`;
  return { name, rules: fromNodes ? identityRules(requests, name) : base, tokenSecret: fromNodes };
}

/** `list pods (cluster-wide), get nodes node-1, patch configmaps in kr-load`: what the identity is granted, for plans. */
export function describeRules(rules: IdentityRules): string {
  const one = (r: Rule, where: string) =>
    `${r.verbs.join('/')} ${r.apiGroups[0] ? `${r.resources[0]}.${r.apiGroups[0]}` : r.resources[0]}${r.resourceNames ? ` ${r.resourceNames[0]}` : ''}${where}`;
  return [
    ...rules.cluster.map((r) => one(r, r.resourceNames ? '' : ' (cluster-wide)')),
    ...Object.entries(rules.namespaced).flatMap(([ns, rs]) => rs.map((r) => one(r, ` in ${ns}`))),
  ].join(', ');
}

/** What the executor needs to create, use and remove the identity: its objects by name, and every rule it grants. */
export function identityAccess(id: RunIdentity, fromNodes: boolean): ResolvedAccess[] {
  const n = id.name;
  const rbac = (resource: string, namespace?: string): ResolvedAccess[] => [
    { apiGroup: RBAC_GROUP, resource, verbs: ['create'], ...(namespace ? { namespace } : {}) },
    { apiGroup: RBAC_GROUP, resource, verbs: ['update', 'delete'], ...(namespace ? { namespace } : {}), name: n },
  ];
  const out: ResolvedAccess[] = [
    { apiGroup: '', resource: 'serviceaccounts', verbs: ['create'], namespace: LOAD_NAMESPACE },
    { apiGroup: '', resource: 'serviceaccounts', verbs: ['update', 'delete', 'impersonate'], namespace: LOAD_NAMESPACE, name: n },
    ...rbac('clusterroles'),
  ];
  if (id.rules.cluster.length) out.push(...rbac('clusterrolebindings'));
  for (const ns of Object.keys(id.rules.namespaced)) out.push(...rbac('roles', ns), ...rbac('rolebindings', ns));
  if (fromNodes)
    out.push(
      { apiGroup: '', resource: 'serviceaccounts/token', verbs: ['create'], namespace: LOAD_NAMESPACE, name: n },
      { apiGroup: '', resource: 'secrets', verbs: ['create'], namespace: LOAD_NAMESPACE },
      { apiGroup: '', resource: 'secrets', verbs: ['update', 'delete'], namespace: LOAD_NAMESPACE, name: n },
    );
  // escalation prevention: a Role or ClusterRole may be created, and bound, only by someone who holds its rules
  const held = (r: Rule, namespace?: string): ResolvedAccess => ({
    apiGroup: r.apiGroups[0]!,
    resource: r.resources[0]!,
    verbs: r.verbs as ResolvedAccess['verbs'],
    ...(namespace ? { namespace } : {}),
    ...(r.resourceNames ? { name: r.resourceNames[0]! } : {}),
  });
  for (const r of id.rules.cluster) out.push(held(r));
  for (const [ns, rs] of Object.entries(id.rules.namespaced)) for (const r of rs) out.push(held(r, ns));
  return out;
}

interface Meta {
  name: string;
  namespace?: string;
  uid?: string;
  labels?: Record<string, string>;
  ownerReferences?: { apiVersion: string; kind: string; name: string; uid: string }[];
}

/** Every object of the identity, as paths and bodies: the ClusterRole first (the owner), then what it owns. */
function objects(id: RunIdentity, runLabel: string) {
  const run = runLabel
    .replace(/[^A-Za-z0-9._-]/g, '-')
    .slice(0, 63)
    .replace(/^[^A-Za-z0-9]+|[^A-Za-z0-9]+$/g, '');
  const labels = { 'app.kubernetes.io/managed-by': 'kube-runbook', 'kube-runbook/load-identity': id.name, 'kube-runbook/run': run };
  const meta = (namespace?: string): Meta => ({ name: id.name, ...(namespace ? { namespace } : {}), labels });
  const subjects = [{ kind: 'ServiceAccount', name: id.name, namespace: LOAD_NAMESPACE }];
  const owned: { collection: string; body: Record<string, unknown> }[] = [
    {
      collection: `/api/v1/namespaces/${LOAD_NAMESPACE}/serviceaccounts`,
      body: { apiVersion: 'v1', kind: 'ServiceAccount', metadata: meta(LOAD_NAMESPACE), automountServiceAccountToken: false },
    },
  ];
  if (id.tokenSecret)
    owned.push({
      collection: `/api/v1/namespaces/${LOAD_NAMESPACE}/secrets`,
      body: { apiVersion: 'v1', kind: 'Secret', type: 'Opaque', metadata: meta(LOAD_NAMESPACE) },
    });
  if (id.rules.cluster.length)
    owned.push({
      collection: `${RBAC}/clusterrolebindings`,
      body: {
        apiVersion: `${RBAC_GROUP}/v1`,
        kind: 'ClusterRoleBinding',
        metadata: meta(),
        roleRef: { apiGroup: RBAC_GROUP, kind: 'ClusterRole', name: id.name },
        subjects,
      },
    });
  for (const [ns, rules] of Object.entries(id.rules.namespaced))
    owned.push(
      { collection: `${RBAC}/namespaces/${ns}/roles`, body: { apiVersion: `${RBAC_GROUP}/v1`, kind: 'Role', metadata: meta(ns), rules } },
      {
        collection: `${RBAC}/namespaces/${ns}/rolebindings`,
        body: {
          apiVersion: `${RBAC_GROUP}/v1`,
          kind: 'RoleBinding',
          metadata: meta(ns),
          roleRef: { apiGroup: RBAC_GROUP, kind: 'Role', name: id.name },
          subjects,
        },
      },
    );
  const owner = {
    collection: `${RBAC}/clusterroles`,
    body: { apiVersion: `${RBAC_GROUP}/v1`, kind: 'ClusterRole', metadata: meta(), rules: id.rules.cluster },
  };
  return { owner, owned };
}

/**
 * Creates the identity, or makes what is there exactly it (an object of its name left by a run killed before its
 * revert is written over: its rules, subjects and owner are this identity's). Concurrent calls (the nodes of one
 * step) are safe: a create that finds the object replaces it with the same.
 */
export async function createIdentity(
  kube: KubeAccess,
  id: RunIdentity,
  runLabel: string,
): Promise<{ anchor: { path: string; uid: string }; secretUid?: string }> {
  const { owner, owned } = objects(id, runLabel);
  const anchor = await put(kube, owner.collection, owner.body);
  const ownerReferences = [{ apiVersion: `${RBAC_GROUP}/v1`, kind: 'ClusterRole', name: id.name, uid: anchor.uid! }];
  let secretUid: string | undefined;
  for (const o of owned) {
    const body = { ...o.body, metadata: { ...(o.body.metadata as Meta), ownerReferences } };
    const made = await put(kube, o.collection, body);
    if (o.body.kind === 'Secret') secretUid = made.uid;
  }
  const made = { path: `${owner.collection}/${id.name}`, uid: anchor.uid! };
  return secretUid ? { anchor: made, secretUid } : { anchor: made };
}

/** POST, or on 409 PUT over what is there; returns the object's metadata. */
async function put(kube: KubeAccess, collection: string, body: Record<string, unknown>): Promise<Meta> {
  const name = (body.metadata as Meta).name;
  try {
    return (await kube.json!<{ metadata: Meta }>(collection, { method: 'POST', body, timeoutMs: 10_000 })).metadata;
  } catch (e) {
    if (!(e instanceof ApiStatusError && e.status === 409)) throw identityError(collection, name, e);
  }
  try {
    return (await kube.json!<{ metadata: Meta }>(`${collection}/${name}`, { method: 'PUT', body, timeoutMs: 10_000 })).metadata;
  } catch (e) {
    throw identityError(collection, name, e);
  }
}

/** Transient where the request's failure is (a struggling apiserver): creating the identity again does no harm. */
const identityError = (collection: string, name: string, e: unknown) =>
  new KrError(
    'LOAD_IDENTITY',
    `load-apiserver: cannot create the load's identity (${collection}/${name}): ${e instanceof ApiStatusError ? `${e.status} ${quote(e.message, 200)}` : String(e)}`,
    { cause: e, transient: kubeTransient(e, { idempotentWrite: true, safeToRepeat: true }) },
  );

/**
 * Deletes every object of the identity, the ServiceAccount first (its tokens stop working with it), the ClusterRole
 * last (its garbage collection would remove the rest too). Idempotent: what is gone already is fine.
 */
export async function removeIdentity(kube: KubeAccess, id: IdentityRef): Promise<{ left: string[]; transient?: string }> {
  const failed: string[] = [];
  let transient: string | undefined;
  const paths = [
    `/api/v1/namespaces/${LOAD_NAMESPACE}/serviceaccounts`,
    ...(id.tokenSecret ? [`/api/v1/namespaces/${LOAD_NAMESPACE}/secrets`] : []),
    ...(id.cluster ? [`${RBAC}/clusterrolebindings`] : []),
    ...id.namespaces.flatMap((ns) => [`${RBAC}/namespaces/${ns}/rolebindings`, `${RBAC}/namespaces/${ns}/roles`]),
    `${RBAC}/clusterroles`,
  ];
  for (const collection of paths) {
    const path = `${collection}/${id.name}`;
    await kube.json!(path, { method: 'DELETE', timeoutMs: 10_000 }).catch((e: unknown) => {
      if (e instanceof ApiStatusError && e.status === 404) return;
      failed.push(`${path}: ${e instanceof Error ? e.message : String(e)}`);
      transient ??= kubeTransient(e, { safeToRepeat: true });
    });
  }
  return transient ? { left: failed, transient } : { left: failed };
}

/** What removes the identity by hand, for a report that says what is left. */
export const removeCommand = (id: Pick<RunIdentity, 'name'>): string =>
  `kubectl delete clusterrole ${id.name} (its ServiceAccount ${LOAD_NAMESPACE}/${id.name}, bindings and Roles go with it)`;
