/** The few fields of Kubernetes objects the simulator reads, as they come over the wire (times are RFC 3339 strings). */
export interface MetaLite {
  name: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  deletionTimestamp?: string;
  deletionGracePeriodSeconds?: number;
  labels?: Record<string, string>;
}

export interface ConditionLite {
  type: string;
  status: string;
  reason?: string;
  message?: string;
  lastHeartbeatTime?: string;
  lastTransitionTime?: string;
}

/** A container's environment variable, as far as the lab resolves it. */
export interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { fieldRef?: { fieldPath: string }; secretKeyRef?: { name: string; key: string } };
}

export interface PodLite {
  metadata: MetaLite;
  spec?: {
    nodeName?: string;
    serviceAccountName?: string;
    restartPolicy?: 'Always' | 'OnFailure' | 'Never';
    containers?: {
      name: string;
      image?: string;
      command?: string[];
      args?: string[];
      env?: EnvVar[];
      securityContext?: { runAsUser?: number; runAsGroup?: number };
    }[];
  };
  status?: {
    phase?: string;
    podIP?: string;
    conditions?: ConditionLite[];
    containerStatuses?: { name: string; ready?: boolean; containerID?: string }[];
  };
}

export interface NodeLite {
  metadata: MetaLite;
  status?: { conditions?: ConditionLite[] };
}

/** One simulated node's identity and timings. */
export interface SimNodeConfig {
  name: string;
  zone?: string;
  region?: string;
  ip: string;
  /** e.g. 100.64.1.0/24; pod IPs are handed out from it. */
  podCidr: string;
  leaseDurationMs: number;
  /** How often NodeStatus is posted when nothing changed. */
  statusReportFrequencyMs: number;
  /** How often the simulator compares the Node's status with its own (the kubelet's nodeStatusUpdateFrequency). */
  statusCheckMs: number;
  kubeletVersion: string;
  labels?: Record<string, string>;
}

/** `config.json` of a node's kubelet service. */
export interface KubeletSimFile extends SimNodeConfig {
  kubeconfig: string;
  runtimeDir: string;
  heartbeatFile: string;
  /** The unix socket of the node's apiserver forwarder (in its network namespace); absent: dial the apiserver. */
  apiSocket?: string;
  /** The node's network namespace: its agent pods' processes are started in it. */
  netns?: string;
  /** Pods of this image run their command for real (the node agent); `kube-runbook` is this CLI (`cli`: node and its script). */
  agent?: { image: string; cli: string[] };
}

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED';
