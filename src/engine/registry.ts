import { KrError } from '../core/errors.js';
import { actionIds, loadAction } from '../actions/index.js';
import type { Action } from '../contract/action.js';
import { loadProbe, probeIds } from '../probes/index.js';
import type { Probe } from '../contract/probe.js';

/** Where the engine gets its modules; tests hand it fakes. */
export interface Registry {
  action(id: string): Promise<Action>;
  probe(id: string): Promise<Probe>;
}

export const defaultRegistry: Registry = {
  async action(id) {
    const a = await loadAction(id);
    if (!a) throw new KrError('UNKNOWN_ACTION', `unknown action "${id}" (known: ${actionIds().join(', ')})`, { exit: 2 });
    return a;
  },
  async probe(id) {
    const p = await loadProbe(id);
    if (!p) throw new KrError('UNKNOWN_PROBE', `unknown probe "${id}" (known: ${probeIds().join(', ')})`, { exit: 2 });
    return p;
  },
};

/** A registry of the given modules only (tests). */
export function registryOf(actions: Action[], probes: Probe[]): Registry {
  const a = new Map(actions.map((x) => [x.meta.id, x]));
  const p = new Map(probes.map((x) => [x.meta.id, x]));
  return {
    async action(id) {
      const x = a.get(id);
      if (!x) throw new KrError('UNKNOWN_ACTION', `unknown action "${id}"`, { exit: 2 });
      return x;
    },
    async probe(id) {
      const x = p.get(id);
      if (!x) throw new KrError('UNKNOWN_PROBE', `unknown probe "${id}"`, { exit: 2 });
      return x;
    },
  };
}
