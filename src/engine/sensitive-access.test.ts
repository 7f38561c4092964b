import { describe, expect, it } from 'vitest';
import { sensitiveGrants } from './sensitive-access.js';

const grants = (cluster: object[], namespaced: Record<string, object[]> = {}) =>
  sensitiveGrants({ cluster: cluster as never, namespaced: namespaced as never }).map((g) => g.grant);

describe('sensitive grants, by verb, resource and scope', () => {
  it('names acting as others, wildcards, escalate and bind, wherever they come from', () => {
    expect(
      grants([
        { apiGroups: [''], resources: ['users'], verbs: ['impersonate'] },
        { apiGroups: ['*'], resources: ['*'], verbs: ['get'] },
        { apiGroups: ['rbac.authorization.k8s.io'], resources: ['clusterroles'], verbs: ['escalate', 'bind', 'get'] },
        { apiGroups: [''], resources: ['serviceaccounts/token'], resourceNames: ['load'], verbs: ['create'] },
      ]),
    ).toEqual([
      'impersonate users (cluster-wide)',
      'get *.* (cluster-wide)',
      'escalate clusterroles.rbac.authorization.k8s.io (cluster-wide)',
      'bind clusterroles.rbac.authorization.k8s.io (cluster-wide)',
      'create serviceaccounts/token load (cluster-wide)',
    ]);
  });

  it('Secrets read cluster-wide or across a namespace; one Secret by name is no such grant', () => {
    expect(grants([{ apiGroups: [''], resources: ['secrets'], verbs: ['list', 'watch'] }])).toEqual([
      'list secrets (cluster-wide)',
      'watch secrets (cluster-wide)',
    ]);
    expect(grants([], { agents: [{ apiGroups: [''], resources: ['secrets'], verbs: ['list', 'delete'] }] })).toEqual([
      'list secrets in agents',
    ]);
    expect(grants([], { agents: [{ apiGroups: [''], resources: ['secrets'], resourceNames: ['key'], verbs: ['get'] }] })).toEqual([]);
  });

  it("Leases others live by: written without a name in kube-system or kube-node-lease; a run's own Lease by name is not", () => {
    const lease = (verbs: string[], resourceNames?: string[]) => ({
      apiGroups: ['coordination.k8s.io'],
      resources: ['leases'],
      verbs,
      resourceNames,
    });
    expect(grants([], { 'kube-system': [lease(['update'])], 'kube-node-lease': [lease(['patch'])] })).toEqual([
      'update leases.coordination.k8s.io in kube-system',
      'patch leases.coordination.k8s.io in kube-node-lease',
    ]);
    expect(
      grants([], { 'kube-system': [lease(['create', 'list', 'watch']), lease(['get', 'update'], ['kube-runbook-run-lock'])] }),
    ).toEqual([]);
    expect(grants([], { agents: [lease(['create', 'get', 'update', 'delete'])] })).toEqual([]);
  });

  it('running code in pods: creating or changing pods, exec, attach, ephemeral containers, the kubelet proxy', () => {
    expect(
      grants([{ apiGroups: [''], resources: ['nodes/proxy'], verbs: ['get'] }], {
        agents: [
          { apiGroups: [''], resources: ['pods'], verbs: ['create', 'get', 'list', 'delete'] },
          { apiGroups: [''], resources: ['pods/exec', 'pods/ephemeralcontainers'], verbs: ['create', 'patch'] },
        ],
      }),
    ).toEqual([
      'get nodes/proxy (cluster-wide)',
      'create pods in agents',
      'create pods/exec in agents',
      'patch pods/exec in agents',
      'create pods/ephemeralcontainers in agents',
      'patch pods/ephemeralcontainers in agents',
    ]);
  });

  it('reads of what probes watch are no such grant', () => {
    expect(
      grants([
        { apiGroups: [''], resources: ['nodes', 'pods'], verbs: ['list', 'watch'] },
        { nonResourceURLs: ['/version'], verbs: ['get'] },
      ]),
    ).toEqual([]);
  });
});
