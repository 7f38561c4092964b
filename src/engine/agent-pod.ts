import { defaultAgentImage, type AgentTransport, type InventoryNode } from '../inventory/schema.js';
import {
  AGENT_APP,
  ANNOTATION_NODE,
  ANNOTATION_RUN,
  LABEL_NODE,
  LABEL_RUN,
  agentPodName,
  nodeLabel,
  RESULT_KEY_ENV,
  RESULT_KEY_FIELD,
  runLabel,
} from '../nodes/agent-protocol.js';
import type { AgentKeys } from '../nodes/agent-auth.js';

/** A node reached through an agent, with its transport's settings. */
export interface AgentTarget {
  node: InventoryNode;
  config: AgentTransport;
}

/** What the agent objects of a run hang from: its run Lease in their namespace (deleting it deletes them). */
export interface Owner {
  name: string;
  uid: string;
}

const ownedBy = (o: Owner | undefined) =>
  o ? { ownerReferences: [{ apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', name: o.name, uid: o.uid }] } : {};

const agentLabels = (runId: string, t: AgentTarget) => ({
  'app.kubernetes.io/name': AGENT_APP,
  'app.kubernetes.io/managed-by': 'kube-runbook',
  [LABEL_RUN]: runLabel(runId),
  [LABEL_NODE]: nodeLabel(t.node.name),
});

/** The Secret holding the key a node's agent signs its results with; only the pod's environment reads it. */
export function agentSecret(runId: string, t: AgentTarget, keys: AgentKeys, owner?: Owner): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: agentPodName(runId, t.node.name, keys.fingerprint),
      namespace: t.config.namespace,
      labels: agentLabels(runId, t),
      annotations: { [ANNOTATION_RUN]: runId, [ANNOTATION_NODE]: t.node.name },
      ...ownedBy(owner),
    },
    type: 'Opaque',
    immutable: true,
    // the key as base64 text: it reaches the agent as an environment variable, which holds no arbitrary bytes
    stringData: { [RESULT_KEY_FIELD]: keys.resultKey(t.node.name).toString('base64') },
  };
}

/**
 * The agent pod of a run on a node: privileged, pinned to it, in the host's PID and network namespaces, tolerating
 * every taint; it runs only requests signed by `keys` (their public half in its arguments) and signs its results with
 * its node's key (its Secret, read into its environment).
 */
export function agentPod(
  runId: string,
  t: AgentTarget,
  keys: AgentKeys,
  faultTtlMs: number,
  owner?: Owner,
  /** Where the halts that stop the run are (the cluster's and the run lock's namespace's): the agent follows them. */
  haltNamespaces: string[] = [],
): Record<string, unknown> {
  const c = t.config;
  const name = agentPodName(runId, t.node.name, keys.fingerprint);
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      namespace: c.namespace,
      labels: agentLabels(runId, t),
      annotations: { [ANNOTATION_RUN]: runId, [ANNOTATION_NODE]: t.node.name },
      ...ownedBy(owner),
    },
    spec: {
      nodeName: t.node.name,
      hostPID: true,
      hostNetwork: true,
      dnsPolicy: 'ClusterFirstWithHostNet',
      serviceAccountName: c.serviceAccount,
      automountServiceAccountToken: true,
      priorityClassName: 'system-node-critical',
      tolerations: [{ operator: 'Exists' }],
      // an agent that dies mid-run comes back (its dead-men keep counting meanwhile); one that ends because its run is
      // gone (no renewal for faultTtl) stays ended; one that cannot start shows why
      restartPolicy: 'OnFailure',
      terminationGracePeriodSeconds: 5,
      ...(c.imagePullSecret ? { imagePullSecrets: [{ name: c.imagePullSecret }] } : {}),
      containers: [
        {
          name: 'agent',
          image: c.image ?? defaultAgentImage(),
          command: ['kube-runbook'],
          args: [
            'agent',
            '--node',
            t.node.name,
            '--namespace',
            c.namespace,
            '--run-id',
            runId,
            '--enter',
            c.enter,
            '--executor-key',
            keys.publicKey,
            '--fault-ttl',
            `${Math.ceil(faultTtlMs / 1000)}s`,
            ...haltNamespaces.flatMap((ns) => ['--halt-namespace', ns]),
          ],
          env: [
            { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
            { name: RESULT_KEY_ENV, valueFrom: { secretKeyRef: { name, key: RESULT_KEY_FIELD } } },
          ],
          // iptables' --gid-owner matches a socket's owner group, the process's primary one: still root, in that group
          securityContext: { privileged: true, ...(c.runAsGroup !== undefined ? { runAsUser: 0, runAsGroup: c.runAsGroup } : {}) },
          resources: { requests: { cpu: '10m', memory: '64Mi' }, limits: { memory: '256Mi' } },
          terminationMessagePolicy: 'FallbackToLogsOnError',
        },
      ],
    },
  };
}
