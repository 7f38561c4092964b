/**
 * Service managers: how a Kubernetes component is stopped, started and checked on a node of a given layout.
 * A manager only *writes scripts* (POSIX sh, dash-compatible) from a plain-JSON `ServiceTarget`, so the same
 * target in a journal rebuilds the same revert in a new process, and the node-side dead-man can run the start
 * script on the node without the executor.
 */

/** The components actions stop and start; `haproxy` is the load balancer in front of the apiservers (the VIP). */
export type ServiceName = 'kube-apiserver' | 'kube-controller-manager' | 'kube-scheduler' | 'etcd' | 'kubelet' | 'haproxy';

/** A systemd unit (kubelet on kubeadm; `k3s` / `k3s-agent` on k3s). */
export type SystemdTarget = {
  manager: 'systemd';
  service: ServiceName;
  unit: string;
  /** http(s) URL checked with curl (when the node has it) after start; any of 200/401/403 counts as serving. */
  healthUrl: string | null;
};

/** A kubeadm static pod: its manifest is parked in a directory of ours to stop it, and put back to start it. */
export type StaticPodTarget = {
  manager: 'static-pod';
  service: ServiceName;
  /** /etc/kubernetes/manifests/<service>.yaml */
  manifest: string;
  /** /etc/kubernetes/kube-runbook-parked/<service>.yaml */
  parked: string;
  /** Container name (crictl) and the binary name its command line starts with (pgrep -f). */
  process: string;
  /** Health endpoint on 127.0.0.1; `portFlag` (e.g. `--secure-port`) in the manifest overrides `port`. */
  health: { scheme: 'http' | 'https'; port: number; path: string; portFlag: string | null } | null;
};

/** A lab process: `<stateDir>/nodes/<node>/<service>/{start,stop,status,health,pid}`. */
export type ProcessTarget = {
  manager: 'process';
  service: ServiceName;
  dir: string;
};

export type ServiceTarget = SystemdTarget | StaticPodTarget | ProcessTarget;

/**
 * Scripts for one kind of target. Every script is idempotent and bounded in time (its own loop counts seconds),
 * prints why when it fails, and exits 0 on success.
 */
export interface ServiceManager<T extends ServiceTarget = ServiceTarget> {
  readonly kind: T['manager'];
  /** Read-only: tools present, permissions enough, the service found. Exit 0 ok; otherwise the reason on stdout/stderr. */
  preflight(target: T): string;
  /**
   * Read-only: prints `running` (exit 0) when the service runs or is set to run by its supervisor (a static pod's
   * manifest in place, a unit active or activating, e.g. restarting after a crash), else `stopped` (exit 3). A
   * revert starts again only what was `running` here, and a crash-looping component counts as running.
   */
  status(target: T): string;
  /** Prints the main process id of the running service (exit 0), or exits 3 when it is not running. */
  pid(target: T): string;
  /** Stops the service and waits up to `timeoutS` seconds until it is gone. */
  stop(target: T, timeoutS: number): string;
  /** Starts the service and waits up to `timeoutS` seconds until it is healthy. */
  start(target: T, timeoutS: number): string;
}

/** Exit code of `status` for a service that is not running (as the lab's `status` and LSB say). */
export const STATUS_STOPPED = 3;
