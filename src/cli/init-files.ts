/**
 * The starter runbook and inventory `kube-runbook init` writes, per layout. Written as text rather than through the
 * yaml library so that the comments a new user needs stay beside the values; every value spliced in is a number, a
 * layout from a fixed list, or a context quoted as a JSON string (which YAML reads as a double-quoted scalar).
 */
export const LAYOUTS = ['kubeadm', 'k3s', 'lab', 'agent'] as const;
export type StarterLayout = (typeof LAYOUTS)[number];

export interface Starter {
  layout: StarterLayout;
  /** Worker nodes (the kubeadm, k3s and lab layouts add one control-plane node). */
  nodes: number;
  context: string;
  /** The default lab's state directory (`kube-runbook-lab up` writes its kubeconfig there): for the lab layout. */
  labStateDir: string;
}

/** The context each layout's own tooling names by default. */
export const DEFAULT_CONTEXT: Record<StarterLayout, string> = {
  kubeadm: 'kubernetes-admin@kubernetes',
  k3s: 'default',
  lab: 'lab',
  agent: 'my-cluster',
};

const q = (s: string) => JSON.stringify(s);

function nodeLines(s: Starter): string[] {
  const workers = Array.from({ length: s.nodes }, (_, i) => i + 1);
  if (s.layout === 'agent') return workers.map((i) => `    - {name: node-${i}}                      # the Kubernetes Node name`);
  if (s.layout === 'lab')
    return [
      `    - {name: cp-1, address: 10.213.0.2, roles: [control-plane, etcd], netns: kr-lab-cp-1}`,
      ...workers.map((i) => `    - {name: node-${i}, address: 10.213.0.${i + 2}, roles: [worker], zone: zone-a, netns: kr-lab-node-${i}}`),
    ];
  const cp = s.layout === 'k3s' ? 'server-1' : 'cp-1';
  return [
    `    - {name: ${cp}, address: 192.0.2.10, roles: [control-plane, etcd], zone: zone-a}`,
    ...workers.map((i) => `    - {name: node-${i}, address: 192.0.2.${i + 10}, roles: [worker], zone: zone-a}`),
  ];
}

function transportLines(s: Starter): string[] {
  switch (s.layout) {
    case 'agent':
      return ['  transport: {type: agent}                # a privileged pod per node, reached through the API (docs/managed-clusters.md)'];
    case 'lab':
      return [
        `  kubeconfig: ${q(`${s.labStateDir}/kubeconfig`)}`,
        '  transport: {type: netns}                # nodes are network namespaces of this machine (`kube-runbook-lab up`)',
        `  lab: {stateDir: ${q(s.labStateDir)}}`,
      ];
    default:
      return ['  transport: {type: ssh, user: root}      # host keys are checked; `sudo: true` for a non-root user'];
  }
}

/** inventory.yaml: how to reach each node and what runs where. */
export function starterInventory(s: Starter): string {
  const layout = s.layout === 'agent' ? 'kubeadm' : s.layout;
  return [
    `# Written by \`kube-runbook init --layout ${s.layout}\`. Put your own nodes' names and addresses here, then`,
    s.layout === 'lab'
      ? '# `kube-runbook validate inventory.yaml`. `kube-runbook-lab up` writes the exact one: `kube-runbook-lab env` names it.'
      : '# `kube-runbook validate inventory.yaml`.',
    'apiVersion: kube-runbook/v1',
    'kind: Inventory',
    'metadata:',
    `  name: starter-${s.layout}`,
    'spec:',
    `  layout: ${layout}`,
    `  context: ${q(s.context)}`,
    ...transportLines(s),
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
    `  safety: {allowContexts: [${q(s.context)}], maxDuration: 15m, faultTtl: 5m}`,
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
