import { EXIT, KrError, quote } from 'kube-runbook/internal/core/errors.js';
import { formatDuration, parseDuration } from 'kube-runbook/internal/core/duration.js';

/** A duration as a string (`8s`) or milliseconds. */
export type DurationInput = string | number;

/** What `lab up` can be told; every node-lifecycle setting is a flag of the real controller-manager. */
export interface LabUpOptions {
  instance?: string;
  /** Control-plane members cp-1..N: 1 (default), or 3 or 5 for an HA control plane behind HAProxy. */
  controlPlanes?: number;
  /** Simulated worker nodes node-1..N (0 is allowed: a control plane only, e.g. for fleet mode). */
  nodes?: number;
  /** Real worker nodes rnode-1..N: the release's kubelet with containerd, runc and real containers (default 0). */
  realNodes?: number;
  /**
   * The control plane as static pods of a real kubelet on cp-1, from kubeadm's manifests (needs `realNodes`; one
   * control-plane member; 1.37 or 1.34).
   */
  staticPods?: boolean;
  /**
   * The control plane made by the release's kubeadm (`kubeadm init` on cp-1, `kubeadm join` of the real workers):
   * implies `staticPods`; needs `realNodes`; 1.37 or 1.34.
   */
  kubeadm?: boolean;
  /**
   * Workers sd-1..N (at most 3) whose PID 1 is systemd, in PID namespaces of their own, joined by `kubeadm join` with
   * kubeadm's kubelet unit and drop-in, containerd a unit too, reached over ssh (needs `kubeadm`; default 0).
   */
  systemdNodes?: number;
  /** Zones zone-a, zone-b, ... the nodes are spread over round-robin. */
  zones?: number;
  /** --node-monitor-grace-period (default 8s). */
  grace?: DurationInput;
  /** --node-monitor-period (default 1s). */
  monitorPeriod?: DurationInput;
  /** Kubelet lease renew interval (default 2s); the lease duration is four times it. */
  leaseRenew?: DurationInput;
  /** Default tolerationSeconds for the not-ready and unreachable taints (default 30s; whole seconds). */
  toleration?: DurationInput;
  /** --node-startup-grace-period (default 20s). */
  startupGrace?: DurationInput;
  /** How often a kubelet posts its NodeStatus when nothing changed (default 1m). */
  statusFrequency?: DurationInput;
  evictionRate?: number;
  secondaryEvictionRate?: number;
  unhealthyZoneThreshold?: number;
  largeClusterSizeThreshold?: number;
  /** Create the sample Deployment and Service (default true). */
  workload?: boolean;
  /** Replicas of the sample Deployment (default 2 per node). */
  replicas?: number;
  /** Debian's Prometheus in a namespace of its own, scraping every control-plane component (default false). */
  prometheus?: boolean;
  /** An OpenTelemetry Collector receiving OTLP on the lab's address (default false; built once from the Go module proxy). */
  otel?: boolean;
  /** etcd's --quota-backend-bytes as `512Mi` or `8Gi` (default 512Mi: small, so a disk throttle is felt; large clusters need more). */
  etcdQuota?: string;
}

/** The settings a lab runs with (durations in milliseconds, like the parsed inventory's controller settings). */
export interface LabSettings {
  /** Control-plane members; absent in the state of labs made before HA existed (one member). */
  controlPlanes?: number;
  nodes: number;
  /** Real nodes rnode-1..N; absent in the state of labs made before they existed (none). */
  realNodes?: number;
  /** The control plane runs as static pods of cp-1's real kubelet; absent in the state of labs made before it existed (no). */
  staticPods?: boolean;
  /** cp-1's static pods and the real workers were made by kubeadm; absent in the state of labs made before it existed (no). */
  kubeadm?: boolean;
  /** Workers sd-1..N whose PID 1 is systemd, joined by kubeadm; absent in the state of labs made before they existed (none). */
  systemdNodes?: number;
  zones: number;
  nodeMonitorGracePeriod: number;
  nodeMonitorPeriod: number;
  nodeStartupGracePeriod: number;
  nodeEvictionRate: number;
  secondaryNodeEvictionRate: number;
  unhealthyZoneThreshold: number;
  largeClusterSizeThreshold: number;
  defaultTolerationSeconds: number;
  leaseDuration: number;
  leaseRenewInterval: number;
  nodeStatusReportFrequency: number;
  workload: boolean;
  replicas: number;
  /** Prometheus scrapes the control plane; absent in the state of labs made before it existed (none). */
  prometheus?: boolean;
  /** An OTLP receiver runs; absent in the state of labs made before it existed (none). */
  otel?: boolean;
  /** etcd's space quota in bytes; absent in the state of labs made before it was a setting (512 MiB). */
  etcdQuotaBytes?: number;
}

export const DEFAULT_ETCD_QUOTA_BYTES = 512 * 1024 ** 2;

const MAX_LAB_NODES = 200;
/** Real nodes get the addresses .211 to .249 of the lab's /24. */
const MAX_REAL_NODES = 39;
/** Nodes whose PID 1 is systemd get .252 to .254. */
const MAX_SYSTEMD_NODES = 3;

export function resolveSettings(o: LabUpOptions): LabSettings {
  // a kubeadm lab's nodes are all real: kubeadm's apiserver knows no simulated kubelet's token
  const nodes = int('nodes', o.nodes ?? (o.kubeadm ? 0 : 3), 0, MAX_LAB_NODES);
  const realNodes = int('real-nodes', o.realNodes ?? 0, 0, MAX_REAL_NODES);
  const zones = int('zones', o.zones ?? 1, 1, 26);
  const leaseRenew = ms('lease-renew', o.leaseRenew ?? '2s', 100);
  const toleration = ms('toleration', o.toleration ?? '30s', 0);
  if (toleration % 1000 !== 0) throw bad('toleration', o.toleration, 'a whole number of seconds, e.g. 30s (a number is milliseconds)');
  const controlPlanes = o.controlPlanes ?? 1;
  if (![1, 3, 5].includes(controlPlanes))
    throw bad('control-planes', o.controlPlanes, '1, 3 or 5 (an etcd cluster wants an odd number of members)');
  const kubeadm = flag('kubeadm', o.kubeadm ?? false);
  if (kubeadm && !realNodes)
    throw new KrError(
      'LAB_BAD_OPTION',
      "--kubeadm must be given with --real-nodes N (kubeadm makes cp-1's static pods and joins the real workers), e.g. --real-nodes 2",
      { exit: EXIT.invalid },
    );
  if (kubeadm && o.nodes)
    throw new KrError('LAB_BAD_OPTION', `--kubeadm runs real nodes only (got --nodes ${o.nodes}): give --nodes 0, or leave --nodes out`, {
      exit: EXIT.invalid,
    });
  const systemdNodes = int('systemd-nodes', o.systemdNodes ?? 0, 0, MAX_SYSTEMD_NODES);
  if (systemdNodes && !kubeadm)
    throw new KrError(
      'LAB_BAD_OPTION',
      `--systemd-nodes must be given with --kubeadm (kubeadm join makes them nodes of the cluster), e.g. --kubeadm --real-nodes 1 --systemd-nodes ${systemdNodes}`,
      { exit: EXIT.invalid },
    );
  const staticPods = kubeadm || flag('static-pods', o.staticPods ?? false);
  if (staticPods && !realNodes)
    throw new KrError(
      'LAB_BAD_OPTION',
      "--static-pods must be given with --real-nodes N (cp-1's kubelet, containerd and images are those of real nodes), e.g. --real-nodes 1",
      {
        exit: EXIT.invalid,
      },
    );
  if (staticPods && !kubeadm && controlPlanes !== 1)
    throw new KrError(
      'LAB_BAD_OPTION',
      `--static-pods runs one control-plane member (got --control-planes ${controlPlanes}): for an HA control plane of static pods, give --kubeadm`,
      {
        exit: EXIT.invalid,
      },
    );
  const s: LabSettings = {
    controlPlanes,
    nodes,
    ...(realNodes ? { realNodes } : {}),
    ...(staticPods ? { staticPods } : {}),
    ...(kubeadm ? { kubeadm } : {}),
    ...(systemdNodes ? { systemdNodes } : {}),
    zones,
    nodeMonitorGracePeriod: ms('grace', o.grace ?? '8s', 1000),
    nodeMonitorPeriod: ms('monitor-period', o.monitorPeriod ?? '1s', 100),
    nodeStartupGracePeriod: ms('startup-grace', o.startupGrace ?? '20s', 1000),
    nodeEvictionRate: rate('eviction-rate', o.evictionRate ?? 0.1),
    secondaryNodeEvictionRate: rate('secondary-eviction-rate', o.secondaryEvictionRate ?? 0.01),
    unhealthyZoneThreshold: fraction('unhealthy-zone-threshold', o.unhealthyZoneThreshold ?? 0.55),
    largeClusterSizeThreshold: int('large-cluster-size-threshold', o.largeClusterSizeThreshold ?? 50, 0, 1_000_000),
    defaultTolerationSeconds: toleration / 1000,
    leaseDuration: leaseRenew * 4,
    leaseRenewInterval: leaseRenew,
    nodeStatusReportFrequency: ms('status-frequency', o.statusFrequency ?? '1m', 1000),
    workload: o.workload ?? true,
    replicas: int('replicas', o.replicas ?? Math.max(2, 2 * (nodes + realNodes + systemdNodes)), 0, 10_000),
    prometheus: flag('prometheus', o.prometheus ?? false),
    otel: flag('otel', o.otel ?? false),
    etcdQuotaBytes: o.etcdQuota === undefined ? DEFAULT_ETCD_QUOTA_BYTES : quota(o.etcdQuota),
  };
  if (s.workload && nodes + realNodes === 0) s.workload = false;
  return s;
}

/** Control-plane member names cp-1..N. */
export function controlPlaneNodes(s: Pick<LabSettings, 'controlPlanes'>): string[] {
  return Array.from({ length: s.controlPlanes ?? 1 }, (_, i) => `cp-${i + 1}`);
}

/** Zone of node-i (1-based): zone-a, zone-b, ... round-robin. */
export function zoneOf(index: number, zones: number): string {
  return `zone-${String.fromCharCode(97 + ((index - 1) % zones))}`;
}

/** Go duration text for a component flag: whole seconds as `8s`, else milliseconds. */
export function goDuration(msValue: number): string {
  return msValue % 1000 === 0 ? `${msValue / 1000}s` : `${msValue}ms`;
}

export function describeSettings(s: LabSettings): string {
  return (
    `grace ${formatDuration(s.nodeMonitorGracePeriod)}, monitor period ${formatDuration(s.nodeMonitorPeriod)}, ` +
    `lease renew ${formatDuration(s.leaseRenewInterval)}, toleration ${s.defaultTolerationSeconds}s`
  );
}

function ms(flag: string, v: DurationInput, min: number): number {
  const n = typeof v === 'number' ? v : parseDuration(v);
  if (n === undefined || !Number.isFinite(n) || n < min) throw bad(flag, v, `a duration of at least ${formatDuration(min)}, e.g. 8s`);
  return Math.round(n);
}

/** etcd accepts up to 8 GiB without warning; the lab takes 64 MiB to 64 GiB. */
function quota(v: string): number {
  const m = /^(\d+)(Mi|Gi)$/.exec(v);
  const bytes = m ? Number(m[1]) * 1024 ** (m[2] === 'Gi' ? 3 : 2) : NaN;
  if (!(bytes >= 64 * 1024 ** 2 && bytes <= 64 * 1024 ** 3)) throw bad('etcd-quota', v, 'a size from 64Mi to 64Gi, e.g. 512Mi or 8Gi');
  return bytes;
}

function int(flag: string, v: number, min: number, max: number): number {
  if (!Number.isInteger(v) || v < min || v > max) throw bad(flag, v, `a whole number from ${min} to ${max}`);
  return v;
}

function flag(name: string, v: unknown): boolean {
  if (typeof v !== 'boolean') throw bad(name, v, 'on or off (true or false)');
  return v;
}

function rate(flag: string, v: number): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) throw bad(flag, v, 'a rate in nodes per second, 0 or more');
  return v;
}

function fraction(flag: string, v: number): number {
  if (typeof v !== 'number' || !(v >= 0 && v <= 1)) throw bad(flag, v, 'a fraction from 0 to 1');
  return v;
}

function bad(flag: string, v: unknown, expected: string): KrError {
  return new KrError('LAB_BAD_OPTION', `--${flag} must be ${expected} (got ${quote(v)})`, { exit: EXIT.invalid });
}
