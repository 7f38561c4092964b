import type { Probe } from '../contract/probe.js';

/** Every probe, sorted by id, loaded on first use. The parity test checks this list against the folder. */
export const probes: Record<string, () => Promise<Probe>> = {
  'apiserver-health': async () => (await import('./apiserver-health.js')).default as unknown as Probe,
  command: async () => (await import('./command.js')).default as unknown as Probe,
  'controller-manager': async () => (await import('./controller-manager.js')).default as unknown as Probe,
  'endpoints-stability': async () => (await import('./endpoints-stability.js')).default as unknown as Probe,
  'etcd-health': async () => (await import('./etcd-health.js')).default as unknown as Probe,
  'eviction-forecast': async () => (await import('./eviction-forecast.js')).default as unknown as Probe,
  http: async () => (await import('./http.js')).default as unknown as Probe,
  'node-leases': async () => (await import('./node-leases.js')).default as unknown as Probe,
  'node-ready': async () => (await import('./node-ready.js')).default as unknown as Probe,
  'noexecute-taints': async () => (await import('./noexecute-taints.js')).default as unknown as Probe,
  'pod-deletions': async () => (await import('./pod-deletions.js')).default as unknown as Probe,
};

export const probeIds = (): string[] => Object.keys(probes);

export async function loadProbe(id: string): Promise<Probe | undefined> {
  const load = probes[id];
  return load ? load() : undefined;
}
