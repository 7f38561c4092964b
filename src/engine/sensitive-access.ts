import type { PolicyRule } from './access.js';

/** A rule of the executor's RBAC that gives more than it reads like, and why. */
export interface SensitiveGrant {
  /** `impersonate serviceaccounts kr-load in kr-load`, `list secrets in kube-runbook-agents`, `create namespaces (cluster-wide)`. */
  grant: string;
  why: string;
}

const READ = ['get', 'list', 'watch'];
const WRITE = ['create', 'update', 'patch', 'delete', 'deletecollection'];
/** Namespaces whose Leases others live by: the controllers' leader election, the nodes' heartbeats. */
const LEASE_NAMESPACES = ['kube-system', 'kube-node-lease'];

interface Scope {
  /** undefined: cluster-wide (a ClusterRole). */
  namespace?: string;
  names?: string[];
}

/** What one verb on one resource in one scope gives, when it gives more than it reads like. */
function whyOf(verb: string, group: string, resource: string, s: Scope): string | undefined {
  const everywhere = s.namespace === undefined;
  const some = s.names?.length ? s.names.join(', ') : undefined;
  if (verb === '*' || resource === '*' || group === '*') return 'a wildcard grants every verb or resource, those added later included';
  if (verb === 'escalate') return 'lets it grant in a Role more than it holds itself';
  if (verb === 'bind') return 'lets it bind Roles it does not hold, to itself or anyone';
  if (verb === 'impersonate')
    return `acts as ${some ?? `any of the ${resource}${everywhere ? '' : ' of the namespace'}`}: whatever that identity may do, it may`;
  if (resource === 'serviceaccounts/token' && verb === 'create')
    return `mints tokens of ${some ?? 'any ServiceAccount there'}, which stay valid after the run ends`;
  if (resource === 'secrets' && READ.includes(verb) && !some)
    return everywhere
      ? "reads every Secret of the cluster: ServiceAccount tokens, TLS keys, other tools' credentials"
      : `reads every Secret of ${s.namespace}, whoever put it there`;
  if (resource === 'secrets' && verb === 'create')
    return 'a Secret of type kubernetes.io/service-account-token gets a token of any ServiceAccount of its namespace';
  if (resource === 'namespaces' && verb === 'create')
    return "makes namespaces with any labels, a Pod Security level of 'privileged' included";
  if (resource === 'pods' && ['create', 'update', 'patch'].includes(verb))
    return `${verb === 'create' ? 'runs pods' : "changes a running pod's image"} ${everywhere ? 'in any namespace' : `in ${s.namespace}`}: where that namespace admits privileged pods (the node agents'), root on the nodes`;
  if (['pods/exec', 'pods/attach', 'pods/ephemeralcontainers'].includes(resource))
    return `runs commands in ${everywhere ? "any pod's" : `the pods' of ${s.namespace}`} containers, a privileged pod's included (root on its node)`;
  if (resource === 'nodes/proxy') return "reaches the kubelets' API, which runs commands in any pod of the node";
  if (
    resource === 'leases' &&
    WRITE.includes(verb) &&
    verb !== 'create' &&
    !some &&
    (everywhere || LEASE_NAMESPACES.includes(s.namespace!))
  )
    return "may take or end the controllers' leader election (kube-system) and the nodes' heartbeats (kube-node-lease)";
  return undefined;
}

const named = (group: string, resource: string) => (group ? `${resource}.${group}` : resource);

/**
 * The grants among `rules` that give more than their words suggest (acting as someone else, reading Secrets,
 * running pods where they may be privileged, making namespaces, taking Leases others live by, and any wildcard,
 * escalate or bind), each with why: what `kube-runbook manifests` warns about and `plan` lists. Decided by verb,
 * resource and scope alone, whatever module declared them.
 */
export function sensitiveGrants(rules: {
  cluster: readonly PolicyRule[];
  namespaced: Readonly<Record<string, readonly PolicyRule[]>>;
}): SensitiveGrant[] {
  const out: SensitiveGrant[] = [];
  const scan = (rule: PolicyRule, namespace: string | undefined) => {
    for (const group of rule.apiGroups ?? [])
      for (const resource of rule.resources ?? [])
        for (const verb of rule.verbs) {
          const names = rule.resourceNames;
          const why = whyOf(verb, group, resource, { namespace, names });
          if (!why) continue;
          const where = namespace === undefined ? ' (cluster-wide)' : ` in ${namespace}`;
          out.push({ grant: `${verb} ${named(group, resource)}${names?.length ? ` ${names.join(', ')}` : ''}${where}`, why });
        }
  };
  for (const rule of rules.cluster) scan(rule, undefined);
  for (const [namespace, list] of Object.entries(rules.namespaced)) for (const rule of list) scan(rule, namespace);
  return out;
}
