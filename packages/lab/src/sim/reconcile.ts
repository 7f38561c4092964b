import type { SimContainer } from './runtime.js';
import type { PodLite } from './types.js';

/**
 * What a kubelet does with a pod, decided from the pod as the apiserver has it and the containers the
 * runtime runs. Pure, so the kill rules (incident 1's damage) are tested without a cluster.
 */
export type PodAction =
  { kind: 'kill-and-finalize'; reason: string } | { kind: 'finalize' } | { kind: 'start' } | { kind: 'report' } | { kind: 'none' };

export function decidePod(pod: PodLite, containers: SimContainer[], statusCurrent: boolean): PodAction {
  if (pod.metadata.deletionTimestamp) {
    if (containers.length)
      return { kind: 'kill-and-finalize', reason: `pod marked for deletion (deletionTimestamp ${pod.metadata.deletionTimestamp})` };
    return { kind: 'finalize' };
  }
  const phase = pod.status?.phase;
  if (phase === 'Succeeded' || phase === 'Failed') return { kind: 'none' };
  if (!containers.length) return { kind: 'start' };
  return statusCurrent ? { kind: 'none' } : { kind: 'report' };
}

/**
 * After a (re)list: pods whose containers run here but which the apiserver no longer has (deleted while the
 * kubelet was cut off or stopped). Their containers are killed.
 */
export function orphanedPods(containers: SimContainer[], pods: PodLite[]): { podUid: string; namespace: string; pod: string }[] {
  const live = new Set(pods.map((p) => p.metadata.uid));
  const out = new Map<string, { podUid: string; namespace: string; pod: string }>();
  for (const c of containers) if (!live.has(c.podUid)) out.set(c.podUid, { podUid: c.podUid, namespace: c.namespace, pod: c.pod });
  return [...out.values()];
}

export const REASON_GONE = 'pod no longer exists on the apiserver (deleted while this node was out of contact)';
export const REASON_DELETED = 'pod deleted';
