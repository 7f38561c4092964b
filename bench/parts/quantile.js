// The q-quantile of a sample as the benchmarks report it: the smallest value with at least q of the sample at or below
// it (nearest rank); null for an empty sample. The sample is not changed.

/** @param {number[]} xs @param {number} q */
export function quantile(xs, q) {
  if (!xs.length) return null;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))];
}
