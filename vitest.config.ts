import { configDefaults, defineConfig } from 'vitest/config';

/**
 * Unit tests, then the lab end-to-end tests on each Kubernetes version the lab supports: every e2e file on the
 * default (1.37: projects `e2e 1.37`, `e2e 1.37 light`, `e2e 1.37 beside`, `e2e 1.37 demo`, `e2e 1.37 beside older`) but the
 * controller's bare eviction timing; the incident runbooks, that timing and the forecast at scale on
 * 1.34 and 1.20, and the other eviction forecast tests on 1.20. A project's name says the version, and
 * KUBE_RUNBOOK_LAB_VERSION tells the tests (test/e2e/helpers/lab.ts). `npm test` runs three lanes side by side (the
 * unit tests then `e2e 1.37 beside`; `e2e 1.37 light`; `e2e 1.37 demo`: scripts/unit-and-beside.sh), then `e2e 1.37` alone,
 * then `e2e 1.34`, `e2e 1.20` (followed by `e2e 1.34 after 1.20`) and `e2e 1.37 beside older` beside each other, each with its own lab
 * (scripts/e2e-versions.sh).
 */
const e2e = (version: string, include: string[], o: { name?: string; exclude?: string[] } = {}) => ({
  test: {
    name: o.name ?? `e2e ${version}`,
    include,
    exclude: [...configDefaults.exclude, ...(o.exclude ?? [])],
    env: { KUBE_RUNBOOK_LAB_VERSION: version },
    globalSetup: ['test/e2e/helpers/global-setup.ts'],
    testTimeout: 600_000,
    hookTimeout: 1_800_000,
    fileParallelism: false,
    pool: 'forks' as const,
  },
});

/**
 * The default release's files that measure none of the controller's timing: a project of their own, so that they can
 * be run beside the others (`vitest run --project "e2e 1.37 beside"`).
 */
const BESIDE = [
  'test/e2e/lab-up.test.ts',
  'test/e2e/lab-down.test.ts',
  'test/e2e/transports-ssh.test.ts',
  'test/e2e/package.test.ts',
  'test/e2e/timeline-page.test.ts',
];

/**
 * The README's main command (`npm run demo`) end to end, in a lane of its own beside the unit tests (it is the longest
 * file): what it checks (nothing evicted or killed with guards, the cascade without, the forecast before the first
 * eviction) holds on a busy machine too, as the guard fires 20 s ahead and the forecast is a bound. The same lane then
 * runs the actions against the lab's control plane (`e2e 1.37 demo`), whose bounds are ratios to a baseline taken in
 * the same file (etcd's fsync p99 tenfold, the load's rate), not moments, then kubeadm's HA control plane (its bounds: a
 * guard's abort and Nodes that stay Ready, with a member's whole control plane away). disable-taint-eviction's own file
 * (a light one) runs in `e2e 1.37 light`, so that the three lanes end about together (demo 781 s against light 603 s
 * with it here).
 */
const DEMO = ['test/e2e/demo.test.ts', 'test/e2e/actions-lab.test.ts', 'test/e2e/kubeadm-ha.test.ts'];

/**
 * The default release's files that measure none of the controller's timing and hold their bounds with seconds to
 * spare (dead-men within faultTtl + 10 s, exit codes, what preflight refuses, kubeadm's static pods coming back): run
 * beside the older releases' suites (`vitest run --project "e2e 1.37 beside older"`, scripts/e2e-versions.sh), as the
 * 1.37 files that do measure it run alone (so does test/e2e/halt.test.ts, whose bound is 5 s after a halt). Three
 * labs side by side is what this machine holds: a fourth lane (safety, kubeadm, in-cluster) made 1.20's simulated
 * nodes flap and a dead-man's revert miss its 150 s.
 */
const BESIDE_OLDER = [
  'test/e2e/agent.test.ts',
  'test/e2e/actions-deadman.test.ts',
  'test/e2e/kubeadm.test.ts',
  'test/e2e/runbooks.test.ts',
];

/**
 * The default release's files that measure none of the controller's timing on a lab of a few simulated nodes (or a
 * kubeadm lab with a systemd node joined) and generate no load (dead-men within faultTtl + 10 s, no eviction past a toleration, a
 * fleet's steps, PromQL guards, audit's reading of the flags): run beside the unit tests and the demo (`vitest run
 * --project "e2e 1.37 light"`, scripts/unit-and-beside.sh), not beside `e2e 1.37`, whose real controller they would
 * share the machine with.
 */
const LIGHT = [
  'test/e2e/lab-fleet.test.ts',
  'test/e2e/probes-audit.test.ts',
  'test/e2e/probes-workloads.test.ts',
  'test/e2e/promql.test.ts',
  'test/e2e/safety.test.ts',
  'test/e2e/systemd-node.test.ts',
  'test/e2e/taint-eviction.test.ts',
];

/**
 * The controller's bare eviction timing (NotReady, NoExecute, eviction after the toleration, the evicted pods'
 * DisruptionTarget, kills on return): on 1.34 and 1.20, not on the default release, where the eviction forecast's
 * tests (NotReady and the first eviction, never late, early by at most a monitor period + 2 s), the unguarded
 * incidents (evictions after the toleration, kills on return counted by containerd) and taint-eviction.test.ts
 * (DeletionByTaintManager) show the same and more.
 */
const EVICTION_TIMING = 'test/e2e/lab-eviction.test.ts';

/**
 * The eviction forecast and the controller stand-in against the real controller's recorded decisions at scale (zones
 * above the large-cluster threshold, one partially disrupted): on every release, whose controllers order their taint
 * queues differently (docs/kubernetes-versions.md). 1.20's runs alone after `e2e 1.37` (`e2e 1.20 alone`): its
 * leftover queue entries make which nodes the stand-in re-taints and evicts depend on when the controller's passes
 * fall, and beside two labs of real nodes being made by kubeadm only 6 of 20 stand-in runs matched the record.
 */
const FORECAST_SCALE = 'test/e2e/forecast-scale.test.ts';

/*
 * 1.34's incidents (the longest of the older releases' files, on a kubeadm lab) are a lane of their own beside the
 * others; 1.34's controller timing and forecast at scale (`e2e 1.34 after 1.20`) run in the 1.20 lane once 1.20's
 * files have ended (scripts/e2e-versions.sh), so the three lanes end closer together.
 */

/**
 * Unit tests that need root: they make network namespaces (the netns transport), or run a fault through the local
 * transport whose node-side dead-man writes under /var/lib/kube-runbook (a run in its own process, recover). `npm test`
 * runs them beside the others; `npm run test:unit` leaves them out, so that it runs without root.
 */
const NEEDS_ROOT = ['src/nodes/netns.test.ts', 'src/cli/signals.test.ts', 'src/engine/recover.test.ts'];

export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'unit',
          // the product's and the lab's (packages/lab)
          include: ['src/**/*.test.ts', 'test/*.test.ts', 'packages/lab/src/**/*.test.ts'],
          exclude: [...configDefaults.exclude, ...NEEDS_ROOT],
          testTimeout: 20_000,
        },
      },
      {
        test: {
          name: 'unit root',
          include: NEEDS_ROOT,
          testTimeout: 20_000,
        },
      },
      e2e('1.37', ['test/e2e/**/*.test.ts'], { exclude: [...BESIDE, ...DEMO, ...BESIDE_OLDER, ...LIGHT, EVICTION_TIMING] }),
      e2e('1.37', LIGHT, { name: 'e2e 1.37 light' }),
      e2e('1.37', BESIDE, { name: 'e2e 1.37 beside' }),
      e2e('1.37', DEMO, { name: 'e2e 1.37 demo' }),
      e2e('1.37', BESIDE_OLDER, { name: 'e2e 1.37 beside older' }),
      e2e('1.34', ['test/e2e/incidents.test.ts']),
      e2e('1.34', [EVICTION_TIMING, FORECAST_SCALE], { name: 'e2e 1.34 after 1.20' }),
      e2e('1.20', ['test/e2e/incidents.test.ts', 'test/e2e/probes-forecast.test.ts', EVICTION_TIMING]),
      e2e('1.20', [FORECAST_SCALE], { name: 'e2e 1.20 alone' }),
    ],
  },
});
