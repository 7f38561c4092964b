/**
 * One part of a lab that `lab up` starts: etcd, the apiservers, the controllers, HAProxy, the simulated and the real
 * nodes, the workload, Prometheus, the OTLP collector. Each is planned from the LabPlan (its factory), then `up` runs
 * every `write`, and then, one component after the other, `start` and `ready`.
 */
export interface LabComponent {
  /** What it is, for messages. */
  readonly name: string;
  /** Writes its files (services, configurations, kubeconfigs); nothing runs yet. */
  write(): Promise<void>;
  /** Starts its processes. */
  start(): Promise<void>;
  /** Waits until it serves what the components after it need. */
  ready(): Promise<void>;
}

const nothing = async () => {};

/** A component from the parts it has: those it lacks do nothing. */
export const component = (c: Partial<LabComponent> & { name: string }): LabComponent => ({
  write: nothing,
  start: nothing,
  ready: nothing,
  ...c,
});
