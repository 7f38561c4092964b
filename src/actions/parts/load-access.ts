import type { ResolvedAccess, ResourceAccess } from '../../contract/access.js';
import { LOAD_NAMESPACE, type LoadRequest } from './api-load.js';
import { identityAccess, runIdentity } from './load-identity.js';

/** load-apiserver's meta.access: what the executor needs for the identity the run makes, or for an existing one. */
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
export function identityDeclarations(): ResourceAccess[] {
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

export const existingTokenAccess = (as: string): ResolvedAccess[] => [
  { apiGroup: '', resource: 'serviceaccounts/token', verbs: ['create'], namespace: as.split('/')[0]!, name: as.split('/')[1]! },
];
