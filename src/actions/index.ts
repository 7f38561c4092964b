import type { Action } from './types.js';

/** Every action, sorted by id, loaded on first use. The parity test checks this list against the folder. */
export const actions: Record<string, () => Promise<Action>> = {
  'run-command': async () => (await import('./run-command.js')).default as unknown as Action,
};

export const actionIds = (): string[] => Object.keys(actions);

export async function loadAction(id: string): Promise<Action | undefined> {
  const load = actions[id];
  return load ? load() : undefined;
}
