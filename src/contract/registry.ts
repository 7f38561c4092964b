import { KrError } from '../core/errors.js';
import type { ModuleCatalog, ModuleKind, ParamsMeta } from '../runbook/catalog.js';
import type { Action } from './action.js';
import type { Probe } from './probe.js';

/** Where the engine gets its modules, and the catalog the runbook language checks `with:` against. */
export interface Registry extends ModuleCatalog {
  action(id: string): Promise<Action>;
  probe(id: string): Promise<Probe>;
}

export type Loaders<M> = Readonly<Record<string, () => Promise<M>>>;

/** A registry over lazy loaders by id (the sorted registries of src/actions and src/probes, or fakes). */
export function registryFrom(actions: Loaders<Action>, probes: Loaders<Probe>): Registry {
  const ids = (kind: ModuleKind) => Object.keys(kind === 'action' ? actions : probes).sort();
  const load = async <M>(kind: ModuleKind, loaders: Loaders<M>, id: string): Promise<M> => {
    const loader = Object.hasOwn(loaders, id) ? loaders[id] : undefined;
    if (!loader)
      throw new KrError(`UNKNOWN_${kind.toUpperCase()}`, `unknown ${kind} "${id}" (known: ${ids(kind).join(', ')})`, { exit: 2 });
    return loader();
  };
  return {
    ids,
    action: (id) => load('action', actions, id),
    probe: (id) => load('probe', probes, id),
    async meta(kind, id): Promise<ParamsMeta | undefined> {
      if (!ids(kind).includes(id)) return undefined;
      return (kind === 'action' ? await load('action', actions, id) : await load('probe', probes, id)).meta;
    },
  };
}

/** A registry of the given modules only (tests). */
export function registryOf(actions: Action[], probes: Probe[]): Registry {
  const byId = <M extends { meta: { id: string } }>(ms: M[]): Loaders<M> => Object.fromEntries(ms.map((m) => [m.meta.id, async () => m]));
  return registryFrom(byId(actions), byId(probes));
}
