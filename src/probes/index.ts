import type { Probe } from './types.js';

/** Every probe, sorted by id, loaded on first use. The parity test checks this list against the folder. */
export const probes: Record<string, () => Promise<Probe>> = {
  command: async () => (await import('./command.js')).default as unknown as Probe,
};

export const probeIds = (): string[] => Object.keys(probes);

export async function loadProbe(id: string): Promise<Probe | undefined> {
  const load = probes[id];
  return load ? load() : undefined;
}
