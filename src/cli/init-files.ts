/**
 * The starter runbook and inventory `kube-runbook init` writes, per layout. Written as text rather than through the
 * yaml library so that the comments a new user needs stay beside the values; every value spliced in is a number, a
 * layout from a fixed list, or a string quoted as JSON (which YAML reads as a double-quoted scalar). What `init` could
 * not find is written as a `TODO: ...` string, which no command accepts until it is filled in.
 */
export const LAYOUTS = ['kubeadm', 'k3s', 'lab', 'agent'] as const;
export type StarterLayout = (typeof LAYOUTS)[number];

/** A node of the inventory: found on the cluster, or given at a question. */
export interface StarterNode {
  name: string;
  address?: string;
  roles: readonly string[];
  zone?: string;
  netns?: string;
  /** A lab node's mount namespace file (a kubeadm lab's: its own /etc/kubernetes), as the lab's inventory has it. */
  mountns?: string;
  /** Reached over ssh whatever the inventory's transport (a node of a lab's cluster that is not one of its namespaces). */
  ssh?: boolean;
  /** The node's own transport in the lab's inventory (a node whose PID 1 is systemd: ssh with the lab's key), as it is. */
  transport?: Readonly<Record<string, string | number | boolean>>;
  /** The node's own `kubelet` in the lab's inventory (`systemd`: kubeadm's unit on a lab of lab kubelets). */
  kubelet?: 'systemd' | 'lab';
}

export interface Starter {
  /** Undefined: not known, written as a TODO. */
  layout?: StarterLayout;
  /** Worker nodes written as TODOs when `found` is absent (the kubeadm, k3s and lab layouts add a control-plane node). */
  nodes: number;
  /** The nodes found on the cluster (or a lab's); absent: TODOs, or the default lab's for the lab layout. */
  found?: readonly StarterNode[];
  /** Undefined: not known, written as a TODO (in the runbook's allowContexts too). */
  context?: string;
  /** The kubeconfig to write in the inventory (given with --kubeconfig); absent: found as kubectl finds it. */
  kubeconfig?: string;
  /** The node lifecycle controller's settings found on the cluster (the inventory's spec.controller). */
  controller?: Readonly<Record<string, string | number>>;
  /** Other spec fields of a lab's own inventory (kubeadm, apiserver, prometheus), written as they are. */
  labSpec?: Readonly<Record<string, unknown>>;
  /** The lab's state directory: the default lab's (`kube-runbook-lab up` writes its kubeconfig there), or the lab found. */
  labStateDir: string;
  /** The nodes are a lab's network namespaces (transport netns). */
  netns?: boolean;
  /** Where the values came from, one comment line each. */
  notes?: readonly string[];
}

const q = (s: string) => JSON.stringify(s);
/** A value left to fill in (src/document/todo.ts): validate, plan and run refuse the file until it is. */
const todo = (what: string) => q(`TODO: ${what}`);

function foundLine(s: Starter, n: StarterNode): string {
  const parts = [`name: ${q(n.name)}`];
  if (n.address && s.layout !== 'agent') parts.push(`address: ${q(n.address)}`);
  parts.push(`roles: [${n.roles.join(', ')}]`);
  if (n.zone) parts.push(`zone: ${q(n.zone)}`);
  if (n.netns) parts.push(`netns: ${q(n.netns)}`);
  if (n.mountns) parts.push(`mountns: ${q(n.mountns)}`);
  // JSON is YAML's flow style: every key and string quoted
  if (n.transport) parts.push(`transport: ${JSON.stringify(n.transport)}`);
  else if (n.ssh) parts.push('transport: {type: ssh, user: root}');
  if (n.kubelet) parts.push(`kubelet: ${n.kubelet}`);
  return `    - {${parts.join(', ')}}`;
}

function nodeLines(s: Starter): string[] {
  if (s.found) return s.found.map((n) => foundLine(s, n));
  const workers = Array.from({ length: s.nodes }, (_, i) => i + 1);
  if (s.layout === 'agent') return workers.map((i) => `    - {name: ${todo(`worker ${i}'s Node name`)}, roles: [worker]}`);
  if (s.layout === 'lab')
    return [
      `    - {name: cp-1, address: 10.213.0.2, roles: [control-plane, etcd], netns: kr-lab-cp-1}`,
      ...workers.map((i) => `    - {name: node-${i}, address: 10.213.0.${i + 2}, roles: [worker], zone: zone-a, netns: kr-lab-node-${i}}`),
    ];
  const address = todo('the address ssh connects to');
  return [
    `    - {name: ${todo("a control-plane Node's name")}, address: ${address}, roles: [control-plane, etcd]}`,
    ...workers.map((i) => `    - {name: ${todo(`worker ${i}'s Node name`)}, address: ${address}, roles: [worker]}`),
  ];
}

function transportLines(s: Starter): string[] {
  const kubeconfig = s.kubeconfig ?? (s.layout === 'lab' && !s.found ? `${s.labStateDir}/kubeconfig` : undefined);
  const lines = kubeconfig ? [`  kubeconfig: ${q(kubeconfig)}`] : [];
  if (s.layout === 'agent')
    return [
      ...lines,
      '  transport: {type: agent}                # a privileged pod per node, reached through the API (docs/managed-clusters.md)',
    ];
  if (s.layout === 'lab' || s.netns)
    return [
      ...lines,
      '  transport: {type: netns}                # nodes are network namespaces of this machine (`kube-runbook-lab up`)',
      `  lab: {stateDir: ${q(s.labStateDir)}}`,
    ];
  return [...lines, '  transport: {type: ssh, user: root}      # host keys are checked; `sudo: true` for a non-root user'];
}

function controllerLines(s: Starter): string[] {
  const c = Object.entries(s.controller ?? {});
  if (!c.length) return ["  # controller: the controller-manager's eviction settings, read from the cluster at each run when absent"];
  return [
    "  controller:                             # the controller-manager's, as found on the cluster",
    ...c.map(([k, v]) => `    ${k}: ${typeof v === 'number' ? v : q(v)}`),
  ];
}

const layoutLine = (s: Starter) =>
  `  layout: ${s.layout === undefined ? todo('kubeadm, k3s or lab: how the control plane and kubelets run') : s.layout === 'agent' ? 'kubeadm' : s.layout}`;

/** Whether the inventory has a value left to fill in. */
const hasTodo = (s: Starter) => s.layout === undefined || s.context === undefined || (!s.found && s.layout !== 'lab');

/** inventory.yaml: how to reach each node and what runs where. */
export function starterInventory(s: Starter): string {
  const name = s.layout ?? 'cluster';
  return [
    `# Written by \`kube-runbook init\`. Check the nodes' names and addresses${hasTodo(s) ? ', fill in every TODO' : ''}, then`,
    s.layout === 'lab' && !s.found
      ? '# `kube-runbook validate inventory.yaml`. `kube-runbook-lab up` writes the exact one: `kube-runbook-lab env` names it.'
      : `# \`kube-runbook validate inventory.yaml\`${hasTodo(s) ? ' (it names each TODO left)' : ''}.`,
    ...(s.notes ?? []).map((n) => `# ${n.replace(/[\r\n]+/g, ' ')}`),
    'apiVersion: kube-runbook/v1',
    'kind: Inventory',
    'metadata:',
    `  name: starter-${name}`,
    'spec:',
    layoutLine(s),
    `  context: ${s.context === undefined ? todo('the kubeconfig context to run against') : q(s.context)}`,
    ...transportLines(s),
    ...Object.entries(s.labSpec ?? {}).map(([k, v]) => `  ${k}: ${JSON.stringify(v)}`),
    ...controllerLines(s),
    '  nodes:',
    ...nodeLines(s),
    '',
  ].join('\n');
}

/** runbook.yaml: stop one worker's kubelet for a while, guarded, and bring it back. */
export function starterRunbook(s: Starter): string {
  return [
    '# Written by `kube-runbook init`: one worker loses its kubelet for 30s while guards watch for evictions; the kubelet',
    '# comes back at the end, or as soon as a guard sees trouble. Try `kube-runbook plan runbook.yaml -i inventory.yaml`.',
    'apiVersion: kube-runbook/v1',
    'kind: Runbook',
    'metadata:',
    '  name: starter-kubelet-stop',
    '  description: Stop the kubelet of one worker for 30s; roll back before any pod is evicted.',
    'spec:',
    `  safety: {allowContexts: [${s.context === undefined ? todo('the kubeconfig context to run against') : q(s.context)}], maxDuration: 15m, faultTtl: 5m}`,
    '  guards:',
    '    - {name: eviction forecast, probe: eviction-forecast, with: {margin: 30s}, onViolation: abort, onUnknown: hold}',
    '    - {name: no pod deleted, probe: pod-deletions, with: {max: 0}, onViolation: abort, onUnknown: hold}',
    '  steps:',
    '    - name: steady state',
    '      expect: {probe: node-ready, with: {nodes: all}}',
    '      within: 1m',
    '    - name: stop one kubelet',
    '      action: stop-kubelet',
    '      with: {nodes: {role: worker, count: 1}}',
    '    - name: it stays down a while',
    '      wait: 30s',
    '  rollback:',
    '    waitFor: {probe: node-ready, with: {nodes: all}}',
    '    within: 3m',
    '',
  ].join('\n');
}
