import { KrError, quote } from '../../core/errors.js';
import type { KubeAccess } from '../../kube/types.js';

/**
 * `identity: existing`: a load may be sent as a ServiceAccount the cluster has, by impersonation, only if that account
 * could not make itself (or anyone) more than it is. Refused: kube-system's (they run the controllers; `validate`
 * refuses them where they are written), and any account bound, by name or through its groups, to a role that may
 * escalate, bind or impersonate, or that grants `*` verbs or `*` resources.
 */
const RBAC = '/apis/rbac.authorization.k8s.io/v1';
const DANGEROUS_VERBS = ['escalate', 'bind', 'impersonate', '*'];

interface Subject {
  kind: string;
  name: string;
  namespace?: string;
}
interface Binding {
  metadata: { name: string; namespace?: string };
  roleRef: { kind: string; name: string };
  subjects?: Subject[];
}
interface Role {
  metadata: { name: string; namespace?: string };
  rules?: { verbs?: string[]; resources?: string[]; nonResourceURLs?: string[] }[];
}

/** Why a rule of this role lets its holder grow: undefined when none does. */
function dangerousRule(role: Role): string | undefined {
  for (const r of role.rules ?? []) {
    const verb = (r.verbs ?? []).find((v) => DANGEROUS_VERBS.includes(v));
    if (verb) return `verb ${verb} on ${(r.resources ?? r.nonResourceURLs ?? []).join(', ') || 'nothing named'}`;
    if ((r.resources ?? []).includes('*')) return `every resource (*) with ${(r.verbs ?? []).join(', ')}`;
  }
  return undefined;
}

/** Whether a binding's subject is the ServiceAccount, or a group it is in. */
function names(s: Subject, namespace: string, name: string): boolean {
  if (s.kind === 'ServiceAccount') return s.name === name && (s.namespace ?? '') === namespace;
  if (s.kind === 'User') return s.name === `system:serviceaccount:${namespace}:${name}`;
  if (s.kind === 'Group') return ['system:serviceaccounts', `system:serviceaccounts:${namespace}`, 'system:authenticated'].includes(s.name);
  return false;
}

/**
 * Why the ServiceAccount `namespace/name` may not carry a load: each binding that gives it (or a group of it) a role
 * that may escalate, bind, impersonate or use `*`. Empty when none does. Pure: the cluster's bindings and roles given.
 */
export function dangerousGrants(
  namespace: string,
  name: string,
  rbac: { clusterRoleBindings: Binding[]; roleBindings: Binding[]; clusterRoles: Role[]; roles: Role[] },
): string[] {
  const out: string[] = [];
  const role = (b: Binding): Role | undefined =>
    b.roleRef.kind === 'ClusterRole'
      ? rbac.clusterRoles.find((r) => r.metadata.name === b.roleRef.name)
      : rbac.roles.find((r) => r.metadata.name === b.roleRef.name && r.metadata.namespace === b.metadata.namespace);
  for (const [kind, bindings] of [
    ['ClusterRoleBinding', rbac.clusterRoleBindings],
    ['RoleBinding', rbac.roleBindings],
  ] as const)
    for (const b of bindings) {
      const subject = (b.subjects ?? []).find((s) => names(s, namespace, name));
      if (!subject) continue;
      const r = role(b);
      const why = r && dangerousRule(r);
      if (why)
        out.push(
          `${kind} ${b.metadata.namespace ? `${b.metadata.namespace}/` : ''}${b.metadata.name} gives ${subject.kind === 'ServiceAccount' ? 'it' : `${subject.kind.toLowerCase()} ${subject.name}`} ` +
            `the ${b.roleRef.kind} ${r.metadata.name}: ${why}`,
        );
    }
  return out;
}

/** Reads the cluster's bindings and roles and refuses an account that may grow (LOAD_IDENTITY_UNSAFE). */
export async function refuseDangerousAccount(kube: KubeAccess, as: string, signal?: AbortSignal): Promise<void> {
  const [namespace, name] = as.split('/') as [string, string];
  const list = async <T>(path: string) => (await kube.json!<{ items?: T[] }>(path, { timeoutMs: 30_000, signal })).items ?? [];
  const found = dangerousGrants(namespace, name, {
    clusterRoleBindings: await list<Binding>(`${RBAC}/clusterrolebindings`),
    roleBindings: await list<Binding>(`${RBAC}/rolebindings`),
    clusterRoles: await list<Role>(`${RBAC}/clusterroles`),
    roles: await list<Role>(`${RBAC}/roles`),
  });
  if (found.length)
    throw new KrError(
      'LOAD_IDENTITY_UNSAFE',
      `load-apiserver: refusing to send the load as ${quote(as)}: it could make itself more than it is (${found.slice(0, 3).join('; ')}` +
        `${found.length > 3 ? `; and ${found.length - 3} more` : ''}); leave out \`as\` and \`identity\`, and the run creates an identity with only the load's rights`,
    );
}
