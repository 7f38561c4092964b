import type { Action } from '../contract/action.js';

/** Every action, sorted by id, loaded on first use. The parity test checks this list against the folder. */
export const actions: Record<string, () => Promise<Action>> = {
  'block-kubelet-egress': async () => (await import('./block-kubelet-egress.js')).default as unknown as Action,
  'run-command': async () => (await import('./run-command.js')).default as unknown as Action,
  'stop-apiserver': async () => (await import('./stop-apiserver.js')).default as unknown as Action,
  'stop-controller-manager': async () => (await import('./stop-controller-manager.js')).default as unknown as Action,
  'stop-kubelet': async () => (await import('./stop-kubelet.js')).default as unknown as Action,
  'stop-scheduler': async () => (await import('./stop-scheduler.js')).default as unknown as Action,
  'throttle-etcd-disk': async () => (await import('./throttle-etcd-disk.js')).default as unknown as Action,
};

export const actionIds = (): string[] => Object.keys(actions);

export async function loadAction(id: string): Promise<Action | undefined> {
  const load = actions[id];
  return load ? load() : undefined;
}
