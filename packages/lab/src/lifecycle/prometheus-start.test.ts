import { describe, expect, it } from 'vitest';
import { metricsReaderRbac, METRICS_READER, targetsNotUp } from './prometheus-start.js';

describe("the lab's Prometheus start", () => {
  it("lets Prometheus's user get /metrics and nothing else", () => {
    const { role, binding } = metricsReaderRbac();
    expect(role.metadata?.name).toBe(METRICS_READER);
    expect(role.rules).toEqual([{ nonResourceURLs: ['/metrics'], verbs: ['get'] }]);
    expect(binding.roleRef).toEqual({ apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: METRICS_READER });
    expect(binding.subjects).toEqual([{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'kube-runbook-prometheus' }]);
  });

  it('names every target not up, with its job, node, URL and last error', () => {
    const answer = {
      status: 'success',
      data: {
        activeTargets: [
          { labels: { job: 'etcd', node: 'cp-1' }, scrapeUrl: 'http://10.213.4.2:2379/metrics', health: 'up', lastError: '' },
          {
            labels: { job: 'kube-scheduler', node: 'cp-1' },
            scrapeUrl: 'https://10.213.4.2:10259/metrics',
            health: 'down',
            lastError: 'server returned HTTP status 403 Forbidden',
          },
          {
            labels: { job: 'kube-apiserver', node: 'cp-1' },
            scrapeUrl: 'https://10.213.4.2:6443/metrics',
            health: 'unknown',
            lastError: '',
          },
        ],
      },
    };
    expect(targetsNotUp(answer)).toEqual({
      total: 3,
      notUp: [
        'kube-scheduler cp-1 (https://10.213.4.2:10259/metrics): down: server returned HTTP status 403 Forbidden',
        'kube-apiserver cp-1 (https://10.213.4.2:6443/metrics): unknown',
      ],
    });
  });

  it('reads an answer without targets as none', () => {
    expect(targetsNotUp({ status: 'success', data: { activeTargets: [] } })).toEqual({ total: 0, notUp: [] });
    expect(targetsNotUp({ status: 'error' })).toEqual({ total: 0, notUp: [] });
    expect(targetsNotUp(undefined)).toEqual({ total: 0, notUp: [] });
  });
});
