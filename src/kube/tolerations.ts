import type { SlimTaint, SlimToleration } from './resources.js';

/** The taints the node lifecycle controller puts on nodes whose Ready condition is Unknown or False. */
export const UNREACHABLE = 'node.kubernetes.io/unreachable';
export const NOT_READY = 'node.kubernetes.io/not-ready';

/** Whether one toleration tolerates one taint (k8s.io/api/core/v1 Toleration.ToleratesTaint). */
function tolerates(t: SlimToleration, taint: SlimTaint): boolean {
  if (t.effect && t.effect !== taint.effect) return false;
  if (t.key && t.key !== taint.key) return false;
  switch (t.operator ?? 'Equal') {
    case 'Equal':
      return (t.value ?? '') === (taint.value ?? '');
    case 'Exists':
      return true;
    default:
      return false;
  }
}

/**
 * How long the taint manager lets a pod stay on a node with these NoExecute taints: 0 when some taint is not
 * tolerated (deleted at once), Infinity when tolerated forever, else the smallest tolerationSeconds among the
 * first matching toleration of each taint (as the taint manager picks them), in ms.
 */
export function tolerationMs(tolerations: readonly SlimToleration[], noExecute: readonly SlimTaint[]): number {
  if (noExecute.length === 0) return Infinity;
  const used: SlimToleration[] = [];
  for (const taint of noExecute) {
    const t = tolerations.find((x) => tolerates(x, taint));
    if (!t) return 0;
    used.push(t);
  }
  let min = Infinity;
  for (const t of used) {
    if (t.seconds === undefined) continue;
    if (t.seconds <= 0) return 0;
    min = Math.min(min, t.seconds * 1000);
  }
  return min;
}
