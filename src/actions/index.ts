import type { Action } from '../contract/action.js';

/** Every action, sorted by id, loaded on first use. The parity test checks this list against the folder. */
export const actions: Readonly<Record<string, () => Promise<Action>>> = {
  'block-kubelet-egress': async () => (await import('./block-kubelet-egress.js')).default,
  'disable-taint-eviction': async () => (await import('./disable-taint-eviction.js')).default,
  'load-apiserver': async () => (await import('./load-apiserver.js')).default,
  'run-command': async () => (await import('./run-command.js')).default,
  'shed-apiserver-load': async () => (await import('./shed-apiserver-load.js')).default,
  'starve-cpu': async () => (await import('./starve-cpu.js')).default,
  'stop-apiserver': async () => (await import('./stop-apiserver.js')).default,
  'stop-controller-manager': async () => (await import('./stop-controller-manager.js')).default,
  'stop-etcd': async () => (await import('./stop-etcd.js')).default,
  'stop-kubelet': async () => (await import('./stop-kubelet.js')).default,
  'stop-load-balancer': async () => (await import('./stop-load-balancer.js')).default,
  'stop-scheduler': async () => (await import('./stop-scheduler.js')).default,
  'throttle-etcd-disk': async () => (await import('./throttle-etcd-disk.js')).default,
};
