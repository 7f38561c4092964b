import type { SlimTaint, SlimToleration } from './resources.js';

/** The taints the node lifecycle controller puts on nodes whose Ready condition is Unknown or False. */
export const UNREACHABLE = 'node.kubernetes.io/unreachable';
export const NOT_READY = 'node.kubernetes.io/not-ready';

/** What matching reads of a toleration: a pod's (SlimToleration) or a ResourceClaim's of a device taint (SlimDeviceToleration). */
export type TolerationLike = Pick<SlimToleration, 'key' | 'operator' | 'value' | 'effect'>;
/** What matching reads of a taint: a node's (SlimTaint) or a device's (SlimDeviceTaint). */
export type TaintLike = Pick<SlimTaint, 'key' | 'value' | 'effect'>;

/**
 * Whether one toleration tolerates one taint (k8s.io/api/core/v1 Toleration.ToleratesTaint, v0.37.2; a device
 * taint's resourceclaim.ToleratesTaint matches the same way, without `Lt` and `Gt`): an empty effect matches every
 * effect, an empty key every key (with `Exists`), `Equal` (the default) compares the values. `Lt` and `Gt` (feature
 * gate TaintTolerationComparisonOperators, alpha and off by default since 1.35) compare the values as decimal
 * integers, the taint's against the toleration's, and only where the gate is on; elsewhere, like any operator the
 * server does not know, they tolerate nothing. A toleration that matches nothing can only make a forecast early.
 */
export function toleratesTaint(t: TolerationLike, taint: TaintLike, comparisonOperators = false): boolean {
  if (t.effect && t.effect !== taint.effect) return false;
  if (t.key && t.key !== taint.key) return false;
  switch (t.operator ?? 'Equal') {
    case 'Equal':
      return (t.value ?? '') === (taint.value ?? '');
    case 'Exists':
      return true;
    case 'Lt':
    case 'Gt':
      return comparisonOperators && compareNumericValues(t.value, taint.value, t.operator === 'Lt' ? -1 : 1);
    default:
      return false;
  }
}

/** Decimal integers as content.IsDecimalInteger takes them (an optional minus sign, no leading zeros), within int64. */
const DECIMAL = /^(0|-?[1-9][0-9]{0,18})$/;
const INT64 = [-(2n ** 63n), 2n ** 63n - 1n] as const;

/** compareNumericValues: the taint's value below (`-1`) or above (`1`) the toleration's; false when either is not an integer. */
function compareNumericValues(tolerationValue: string | undefined, taintValue: string | undefined, sign: -1 | 1): boolean {
  const parse = (v: string | undefined) => {
    if (v === undefined || !DECIMAL.test(v)) return undefined;
    const n = BigInt(v);
    return n < INT64[0] || n > INT64[1] ? undefined : n;
  };
  const limit = parse(tolerationValue);
  const value = parse(taintValue);
  if (limit === undefined || value === undefined) return false;
  return sign < 0 ? value < limit : value > limit;
}

/**
 * How long the taint manager lets a pod stay on a node with these NoExecute taints: 0 when some taint is not
 * tolerated (deleted at once), Infinity when tolerated forever, else the smallest tolerationSeconds among the
 * first matching toleration of each taint (as the taint manager picks them), in ms. `comparisonOperators`: the
 * server runs with TaintTolerationComparisonOperators on (off by default on 1.35–1.37).
 */
export function tolerationMs(tolerations: readonly SlimToleration[], noExecute: readonly SlimTaint[], comparisonOperators = false): number {
  if (noExecute.length === 0) return Infinity;
  const used: SlimToleration[] = [];
  for (const taint of noExecute) {
    const t = tolerations.find((x) => toleratesTaint(x, taint, comparisonOperators));
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
