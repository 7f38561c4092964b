// What the probes' scale benchmarks (probes-memory, probes-scale) measure, from the environment both read:
// KUBE_RUNBOOK_BENCH_NODES (default 5000), KUBE_RUNBOOK_BENCH_PODS (pod counts, measured smallest first; default
// "1000 30000 150000") and KUBE_RUNBOOK_BENCH_CHURN (pod deletions per second during the hold; default 10).

/** @param {NodeJS.ProcessEnv} env @returns {{ nodes: number, sizes: number[], churn: number }} */
export function scaleSettings(env) {
  return {
    nodes: Number(env.KUBE_RUNBOOK_BENCH_NODES ?? 5000),
    sizes: (env.KUBE_RUNBOOK_BENCH_PODS ?? '1000 30000 150000')
      .split(/\s+/)
      .filter(Boolean)
      .map(Number)
      .sort((a, b) => a - b),
    churn: Number(env.KUBE_RUNBOOK_BENCH_CHURN ?? 10),
  };
}
