import type { Probe } from '../contract/probe.js';

/** Every probe, sorted by id, loaded on first use. The parity test checks this list against the folder. */
export const probes: Readonly<Record<string, () => Promise<Probe>>> = {
  'apiserver-availability': async () => (await import('./apiserver-availability.js')).default,
  'apiserver-health': async () => (await import('./apiserver-health.js')).default,
  'apiserver-load': async () => (await import('./apiserver-load.js')).default,
  command: async () => (await import('./command.js')).default,
  'controller-manager': async () => (await import('./controller-manager.js')).default,
  'endpoints-stability': async () => (await import('./endpoints-stability.js')).default,
  'etcd-health': async () => (await import('./etcd-health.js')).default,
  'eviction-forecast': async () => (await import('./eviction-forecast.js')).default,
  http: async () => (await import('./http.js')).default,
  'kubernetes-object': async () => (await import('./kubernetes-object.js')).default,
  'leader-election': async () => (await import('./leader-election.js')).default,
  'lease-renewal': async () => (await import('./lease-renewal.js')).default,
  'node-leases': async () => (await import('./node-leases.js')).default,
  'node-ready': async () => (await import('./node-ready.js')).default,
  'noexecute-taints': async () => (await import('./noexecute-taints.js')).default,
  'pod-deletions': async () => (await import('./pod-deletions.js')).default,
  promql: async () => (await import('./promql.js')).default,
  'workload-availability': async () => (await import('./workload-availability.js')).default,
};
