import type { SlimNode, SlimPod } from './resources.js';
import { tolerationMs } from './tolerations.js';

export type DeletionCause =
  | 'taint-eviction'
  | 'device-taint-eviction'
  | 'api-eviction'
  | 'kubelet-eviction'
  | 'preemption'
  | 'garbage-collection'
  | 'delete'
  | 'unknown';

export interface Deletion {
  pod: string;
  node: string;
  /** Clock time it was seen. */
  at: number;
  /** deletionTimestamp set (terminating), or gone without one. */
  how: 'terminating' | 'vanished';
  cause: DeletionCause;
}

const BY_CONDITION: Record<string, DeletionCause> = {
  DeletionByTaintManager: 'taint-eviction',
  // the device taint eviction controller (pkg/controller/devicetainteviction, addConditionAndDeletePod)
  DeletionByDeviceTaintManager: 'device-taint-eviction',
  EvictionByEvictionAPI: 'api-eviction',
  PreemptionByScheduler: 'preemption',
  PreemptionByKubeScheduler: 'preemption',
  DeletionByPodGC: 'garbage-collection',
  TerminationByKubelet: 'kubelet-eviction',
};

/**
 * Why a pod was deleted, when it can be told: the DisruptionTarget condition, the kubelet's `Evicted` reason, or
 * — on servers that do not write the condition (before 1.26, see versions.ts) — the taint manager's timing (its
 * node carries a NoExecute taint and the deletion came when the pod's toleration of it ran out). Otherwise a
 * plain delete (by a user or a controller). `writesDisruptionTarget` false or unknown means: infer.
 */
export function deletionCause(
  pod: SlimPod,
  node: SlimNode | undefined,
  deletedAt: number,
  taintedSince?: number,
  writesDisruptionTarget = false,
): DeletionCause {
  if (pod.disruption) return BY_CONDITION[pod.disruption] ?? 'unknown';
  if (pod.reason === 'Evicted') return 'kubelet-eviction';
  // the taint manager of such a server marks every pod it deletes: without the mark, it was not the taint manager
  if (writesDisruptionTarget) return 'delete';
  const noExecute = (node?.taints ?? []).filter((t) => t.effect === 'NoExecute');
  if (noExecute.length) {
    const tol = tolerationMs(pod.tolerations, noExecute);
    if (tol === 0) return 'taint-eviction';
    // the controller refreshes its taint's timeAdded while the node stays down: the first sighting counts
    const added = taintedSince ?? Math.max(...noExecute.map((t) => t.timeAdded ?? -Infinity));
    // never before the toleration runs out; later when the taint manager started after the taint (a restarted
    // controller-manager starts its timers afresh), so only "not too early" can be told
    if (Number.isFinite(tol) && Number.isFinite(added) && deletedAt >= added + tol - 5_000) return 'taint-eviction';
  }
  return 'delete';
}
