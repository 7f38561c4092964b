import { describe, expect, it } from 'vitest';
import { GET_VERSION, READ_NODE_LEASES, READ_NODES, resolveAccess } from '../contract/access.js';
import { type NeededAccess, distinctChecks, rbacRules } from './access.js';

const need = (by: string, declared: Parameters<typeof resolveAccess>[0], params: Record<string, unknown> = {}): NeededAccess[] =>
  resolveAccess(declared, params).map((access) => ({ by, access }));

describe('access: from modules’ declarations to checks and RBAC rules', () => {
  it('resolves a namespace from a namespace/name param and drops what another param value does not need', () => {
    const declared = [
      { apiGroup: 'coordination.k8s.io', resource: 'leases', verbs: ['list', 'watch'] as const, namespace: { param: 'lease' }, why: 'x' },
      { apiGroup: '', resource: 'endpoints', verbs: ['list'] as const, onlyIf: { param: 'kind', equals: 'endpoints' }, why: 'x' },
    ];
    expect(resolveAccess(declared, { lease: 'kube-system/kcm', kind: 'endpointslices' })).toEqual([
      { apiGroup: 'coordination.k8s.io', resource: 'leases', verbs: ['list', 'watch'], namespace: 'kube-system' },
    ]);
  });

  it('merges verbs per resource, keeps namespaced rules apart, and names everyone who needs a check', () => {
    const needed = [
      ...need('engine', [{ ...READ_NODES, verbs: ['list'] }, GET_VERSION]),
      ...need('probe node-leases', [READ_NODES, READ_NODE_LEASES]),
    ];
    expect(rbacRules(needed)).toEqual({
      cluster: [
        { apiGroups: [''], resources: ['nodes'], verbs: ['list', 'watch'] },
        { nonResourceURLs: ['/version'], verbs: ['get'] },
      ],
      namespaced: { 'kube-node-lease': [{ apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['list', 'watch'] }] },
    });
    const list = distinctChecks(needed).find((c) => c.check.verb === 'list' && c.check.resource === 'nodes');
    expect(list?.by).toEqual(['engine', 'probe node-leases']);
  });
});
