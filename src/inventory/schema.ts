import { z } from 'zod';
import { duration } from '../core/zod-helpers.js';

/** How the executor reaches a node's shell. */
export const SshTransport = z
  .strictObject({
    type: z.literal('ssh'),
    user: z.string().min(1).optional(),
    port: z.number().int().min(1).max(65535).optional(),
    identityFile: z.string().min(1).optional(),
    /** known_hosts file to check host keys against; the user's default when absent. */
    knownHostsFile: z.string().min(1).optional(),
    /** `yes` (default): unknown or changed host keys are refused. `accept-new`: trust on first use only. */
    strictHostKeyChecking: z.enum(['yes', 'accept-new']).default('yes'),
    connectTimeout: duration().prefault('10s'),
    /** Run scripts through `sudo -n` on the node. */
    sudo: z.boolean().default(false),
    jumpHost: z.string().min(1).optional(),
  })
  .meta({ description: 'OpenSSH; the script goes on stdin, host keys are checked' });

const NetnsTransport = z
  .strictObject({ type: z.literal('netns') })
  .meta({ description: 'ip netns exec on this machine (the lab); the namespace is the node name unless the node sets netns' });

const LocalTransport = z.strictObject({ type: z.literal('local') }).meta({ description: 'this machine' });

export const Transport = z.discriminatedUnion('type', [SshTransport, NetnsTransport, LocalTransport]);
export type Transport = z.infer<typeof Transport>;

export const NodeRole = z.enum(['control-plane', 'worker', 'etcd', 'load-balancer']);
export type NodeRole = z.infer<typeof NodeRole>;

export const InventoryNode = z.strictObject({
  name: z.string().min(1).meta({ description: 'the Kubernetes Node name' }),
  address: z.string().min(1).optional().meta({ description: 'host name or IP the transport connects to; the name when absent' }),
  roles: z.array(NodeRole).min(1).default(['worker']),
  zone: z.string().min(1).optional(),
  netns: z.string().min(1).optional().meta({ description: 'network namespace (netns transport); the name when absent' }),
  transport: Transport.optional().meta({ description: 'overrides spec.transport for this node' }),
  labels: z.record(z.string(), z.string()).optional(),
});
export type InventoryNode = z.infer<typeof InventoryNode>;

/** The node lifecycle controller's settings; anything left out is found on the cluster or defaulted. */
export const ControllerSettings = z.strictObject({
  nodeMonitorGracePeriod: duration().optional(),
  nodeMonitorPeriod: duration().optional(),
  nodeStartupGracePeriod: duration().optional(),
  nodeEvictionRate: z.number().min(0).optional(),
  secondaryNodeEvictionRate: z.number().min(0).optional(),
  unhealthyZoneThreshold: z.number().min(0).max(1).optional(),
  largeClusterSizeThreshold: z.number().int().min(0).optional(),
  defaultTolerationSeconds: z.number().int().min(0).optional(),
  leaseDuration: duration().optional().meta({ description: "kubelet's nodeLeaseDurationSeconds; renew is a quarter of it" }),
});
export type ControllerSettings = z.infer<typeof ControllerSettings>;

export const Layout = z.enum(['kubeadm', 'k3s', 'lab']);
export type Layout = z.infer<typeof Layout>;

export const Inventory = z.strictObject({
  apiVersion: z.literal('kube-runbook/v1'),
  kind: z.literal('Inventory'),
  metadata: z.strictObject({ name: z.string().min(1), description: z.string().optional() }),
  spec: z.strictObject({
    layout: Layout.meta({ description: 'how the control plane and kubelets run: kubeadm (static pods + systemd kubelet), k3s (systemd), lab' }),
    kubeconfig: z.string().min(1).optional().meta({ description: 'path; relative to this file; KUBECONFIG or ~/.kube/config when absent' }),
    context: z.string().min(1).optional(),
    transport: Transport.default({ type: 'local' }),
    apiserver: z
      .strictObject({
        endpoints: z.array(z.string().min(1)).min(1).meta({ description: 'host:port the kubelets talk to (the VIP and each apiserver)' }),
      })
      .optional(),
    controller: ControllerSettings.optional(),
    prometheus: z
      .strictObject({
        url: z.url({ protocol: /^https?$/ }).meta({ description: 'the Prometheus the promql probe asks when a runbook gives no url' }),
        bearerTokenFile: z.string().min(1).optional().meta({ description: 'file holding a bearer token for it' }),
        ca: z.string().min(1).optional().meta({ description: 'CA certificate (PEM file) for https' }),
      })
      .optional()
      .meta({ description: "the cluster's Prometheus, if it has one" }),
    lab: z
      .strictObject({ stateDir: z.string().min(1).meta({ description: "the lab's state directory (pids, run scripts, logs)" }) })
      .optional(),
    nodes: z.array(InventoryNode).min(1),
  }),
});
export type Inventory = z.infer<typeof Inventory>;
export type InventoryInput = z.input<typeof Inventory>;
