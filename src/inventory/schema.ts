import { z } from 'zod';
import { duration } from '../core/zod-helpers.js';
import { toolVersion } from '../core/version.js';
import { NODE_NAME } from '../core/names.js';

/**
 * A Node name: an RFC 1123 DNS subdomain, as Kubernetes requires. Names end up in paths (the lab's state dir, the
 * dead-man's directory) and in commands, so `../x` or `-oProxyCommand=…` must never get that far.
 */
const nodeName = () =>
  z
    .string()
    .regex(NODE_NAME, { message: 'expected a Node name: lowercase letters, digits, "-" and "." (RFC 1123), at most 253 characters' });

/** A host name (RFC 1123, any case) or an IPv4 / IPv6 address: what ssh may connect to, never an option. */
const HOST_NAME = /^(?=.{1,253}$)[A-Za-z0-9](?:[-A-Za-z0-9]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[-A-Za-z0-9]{0,61}[A-Za-z0-9])?)*$/;
// an IPv6 link-local address may name its interface (fe80::1%eth0)
const isHost = (s: string) =>
  HOST_NAME.test(s) || z.ipv4().safeParse(s).success || z.ipv6().safeParse(s.replace(/%[A-Za-z0-9_.-]+$/, '')).success;
const host = () => z.string().refine(isHost, { message: 'expected a host name (RFC 1123) or an IP address' });

/** `[user@]host[:port]` for ssh's jump host. */
const JUMP_HOST = /^(?:([A-Za-z0-9_][A-Za-z0-9_.-]*)@)?(\[[0-9A-Fa-f:.]+\]|[^@:[\]]+)(?::(\d{1,5}))?$/;
const jumpHop = (s: string) => {
  const m = JUMP_HOST.exec(s);
  const h = m?.[2]?.replace(/^\[(.*)\]$/, '$1');
  return Boolean(h && isHost(h) && (m?.[3] === undefined || (Number(m[3]) >= 1 && Number(m[3]) <= 65535)));
};
const jumpHost = () =>
  z.string().refine((s) => s.split(',').every(jumpHop), {
    message: 'expected [user@]host[:port] (several separated by commas) with host names or IP addresses',
  });

/** How the executor reaches a node's shell. */
export const SshTransport = z
  .strictObject({
    type: z.literal('ssh'),
    user: z
      .string()
      .regex(/^[A-Za-z0-9_][A-Za-z0-9_.-]*$/, { message: 'expected a user name (letters, digits, "_", "." and "-", not first)' })
      .optional(),
    port: z.number().int().min(1).max(65535).optional(),
    identityFile: z.string().min(1).optional(),
    /** known_hosts file to check host keys against; the user's default when absent. */
    knownHostsFile: z.string().min(1).optional(),
    /** `yes` (default): unknown or changed host keys are refused. `accept-new`: trust on first use only. */
    strictHostKeyChecking: z.enum(['yes', 'accept-new']).default('yes'),
    connectTimeout: duration().prefault('10s'),
    /** Run scripts through `sudo -n` on the node. */
    sudo: z.boolean().default(false),
    /** `ssh -F none`: the user's ~/.ssh/config (ProxyCommand, ForwardAgent, aliases) is not read, for the jump hosts either. */
    ignoreUserConfig: z.boolean().default(false),
    jumpHost: jumpHost()
      .optional()
      .meta({ description: '[user@]host[:port], or several separated by commas, reached in order with the same options as the node' }),
  })
  .meta({ description: 'OpenSSH; the script goes on stdin, host keys are checked' });

const NetnsTransport = z
  .strictObject({ type: z.literal('netns') })
  .meta({ description: 'ip netns exec on this machine (the lab); the namespace is the node name unless the node sets netns' });

const LocalTransport = z.strictObject({ type: z.literal('local') }).meta({ description: 'this machine' });

const K8S_NAME = /^[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?$/;
const k8sName = (what: string) =>
  z.string().regex(K8S_NAME, { message: `expected a ${what}: lowercase letters, digits and "-" (RFC 1123 label)` });

/** The agent image of this version (deploy/agent/Dockerfile), when an inventory names none. */
export const defaultAgentImage = () => `ghcr.io/kube-runbook/kube-runbook-agent:${toolVersion()}`;

/** A privileged pod per node running `kube-runbook agent`, reached through the Kubernetes API (no ssh). */
export const AgentTransport = z
  .strictObject({
    type: z.literal('agent'),
    namespace: k8sName('namespace name')
      .default('kube-runbook-agent')
      .meta({ description: 'where the agent pods, their scripts and the run Lease live' }),
    image: z
      .string()
      .regex(/^[A-Za-z0-9][A-Za-z0-9._/:@-]*$/, { message: 'expected an image reference (registry/name:tag or @sha256:digest)' })
      .max(512)
      .optional()
      .meta({
        description: 'the agent image (deploy/agent/Dockerfile); ghcr.io/kube-runbook/kube-runbook-agent:<this version> when absent',
      }),
    imagePullSecret: k8sName('Secret name')
      .optional()
      .meta({ description: 'a Secret of type kubernetes.io/dockerconfigjson in the namespace, for a private registry' }),
    serviceAccount: k8sName('ServiceAccount name')
      .default('kube-runbook-agent')
      .meta({ description: "the agents' ServiceAccount (`kube-runbook agent manifests`)" }),
    /**
     * `host`: scripts run in PID 1's namespaces (nsenter), on the host as ssh would. `mount`: in the host's mount
     * namespace only: the lab, whose simulated kubelet starts the agent in the node's network namespace already.
     */
    enter: z.enum(['host', 'mount']).default('host').meta({
      description:
        "host: scripts run in PID 1's namespaces (nsenter); mount: in its mount namespace only (the lab, whose agents run in their node's network namespace)",
    }),
    startTimeout: duration().prefault('2m').meta({ description: 'how long preflight waits for every agent pod to run and answer' }),
    /**
     * The group the agent runs in (still user root), so its packets can be told apart: where block-kubelet-egress's
     * scope auto widens to the whole node (a node whose kubelet has no cgroup of its own, as the lab's), it lets this
     * group through and the agent keeps the apiserver. Absent: the image's group, and nothing is let through.
     */
    runAsGroup: z.number().int().min(1).max(4_294_967_294).optional().meta({
      description:
        "the agent's own group (user root stays): block-kubelet-egress under scope auto lets its packets through where it widens to the whole node, so the agent keeps the apiserver; absent: the image's group",
    }),
  })
  .meta({ description: 'a privileged pod per node running `kube-runbook agent`, reached through the Kubernetes API' });
export type AgentTransport = z.output<typeof AgentTransport>;

export const Transport = z.discriminatedUnion('type', [SshTransport, NetnsTransport, LocalTransport, AgentTransport]);
export type Transport = z.infer<typeof Transport>;

export const NodeRole = z.enum(['control-plane', 'worker', 'etcd', 'load-balancer']);
export type NodeRole = z.infer<typeof NodeRole>;

export const InventoryNode = z.strictObject({
  name: nodeName().meta({ description: 'the Kubernetes Node name (RFC 1123)' }),
  address: host().optional().meta({ description: 'host name or IP the transport connects to; the name when absent' }),
  roles: z.array(NodeRole).min(1).default(['worker']),
  zone: z.string().min(1).optional(),
  netns: z
    .string()
    .regex(/^(?!.*\.\.)[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/, {
      message: 'expected a network namespace name (letters, digits, "_", "." and "-")',
    })
    .optional()
    .meta({ description: 'network namespace (netns transport); the name when absent' }),
  mountns: z
    .string()
    .regex(/^(?!.*\/\.\.?(?:\/|$))\/[A-Za-z0-9_./-]{1,4095}$/, {
      message: 'expected an absolute path to a mount namespace file (letters, digits, "_", ".", "-" and "/", no "." or ".." parts)',
    })
    .optional()
    .meta({
      description:
        "mount namespace file (netns transport): scripts run in it too, so the node's own /etc/kubernetes and /var/lib/kubelet are where kubeadm put them (a kubeadm lab's nodes)",
    }),
  transport: Transport.optional().meta({ description: 'overrides spec.transport for this node' }),
  kubelet: z.enum(['systemd', 'lab']).optional().meta({
    description:
      "overrides spec.kubeadm.kubelet for this node: `systemd` for a kubeadm lab's node that runs kubeadm's `kubelet` unit (`lab up --systemd-nodes`)",
  }),
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
    layout: Layout.meta({
      description: 'how the control plane and kubelets run: kubeadm (static pods + systemd kubelet), k3s (systemd), lab',
    }),
    kubeconfig: z
      .string()
      .min(1)
      .optional()
      .meta({ description: 'path, relative to this file; --kubeconfig and $KUBECONFIG come first; ~/.kube/config when absent' }),
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
        bearerTokenFile: z
          .string()
          .min(1)
          .optional()
          .meta({ description: 'file holding a bearer token for it, sent only to this url, and only over https unless `tokenOverHttp`' }),
        tokenOverHttp: z
          .boolean()
          .optional()
          .meta({ description: 'send the bearer token over plain http too (anyone on the path can read it: only for a trusted link)' }),
        ca: z.string().min(1).optional().meta({ description: 'CA certificate (PEM file) for https' }),
      })
      .superRefine((p, ctx) => {
        if (p.bearerTokenFile && /^http:/i.test(String(p.url)) && !p.tokenOverHttp)
          ctx.addIssue({
            code: 'custom',
            path: ['url'],
            message: 'the token of bearerTokenFile goes only over https: use an https:// url, or set tokenOverHttp: true',
          });
      })
      .optional()
      .meta({ description: "the cluster's Prometheus, if it has one" }),
    kubeadm: z
      .strictObject({
        dir: z
          .string()
          .regex(/^\//, 'an absolute path')
          .default('/etc/kubernetes')
          .meta({
            description:
              "kubeadm's directory on the control-plane nodes: `manifests/` (the kubelet's staticPodPath), `admin.conf`, `controller-manager.conf`; " +
              'manifests are parked in `kube-runbook-parked/` beside it',
          }),
        kubelet: z.enum(['systemd', 'lab']).default('systemd').meta({
          description:
            "how the kubelets run: kubeadm's systemd unit `kubelet`, or lab services under `spec.lab.stateDir` (`lab up --static-pods`); a node's own `kubelet` overrides it",
        }),
      })
      .optional()
      .meta({
        description:
          'layout kubeadm: where its files are when not in /etc/kubernetes, and how its kubelets run (a lab of `lab up --static-pods`)',
      }),
    lab: z
      .strictObject({ stateDir: z.string().min(1).meta({ description: "the lab's state directory (pids, run scripts, logs)" }) })
      .optional(),
    nodes: z.array(InventoryNode).min(1),
  }),
});
export type Inventory = z.infer<typeof Inventory>;
export type InventoryInput = z.input<typeof Inventory>;

/**
 * Whether `node`'s kubelet is the lab's (`lab up`): layout lab, or kubeadm with lab kubelets (`lab up --static-pods`)
 * unless the node says `kubelet: systemd` (a kubeadm lab's node whose PID 1 is systemd runs kubeadm's unit). Each such
 * node is a network namespace of its own holding only its kubelet, its runtime and host-network pods.
 */
export const labKubelet = (inventory: Inventory, node: InventoryNode): boolean =>
  inventory.spec.layout === 'lab' || (node.kubelet ?? inventory.spec.kubeadm?.kubelet) === 'lab';
