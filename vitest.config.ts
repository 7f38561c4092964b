import { defineConfig } from 'vitest/config';

/**
 * Unit tests, then the lab end-to-end tests on each Kubernetes version the lab supports: every e2e file on the
 * default (1.37); the incident runbooks and the controller's eviction timing on 1.34 and 1.20 too, and the eviction
 * forecast on 1.20. A project's name
 * says the version, and KUBE_RUNBOOK_LAB_VERSION tells the tests (test/e2e/helpers/lab.ts).
 */
const e2e = (version: string, include: string[]) => ({
  test: {
    name: `e2e ${version}`,
    include,
    env: { KUBE_RUNBOOK_LAB_VERSION: version },
    globalSetup: ['test/e2e/helpers/global-setup.ts'],
    testTimeout: 600_000,
    hookTimeout: 1_800_000,
    fileParallelism: false,
    pool: 'forks' as const,
  },
});

export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'unit',
          include: ['src/**/*.test.ts', 'test/*.test.ts'],
          testTimeout: 20_000,
        },
      },
      e2e('1.37', ['test/e2e/**/*.test.ts']),
      e2e('1.34', ['test/e2e/incidents.test.ts', 'test/e2e/lab-eviction.test.ts']),
      e2e('1.20', ['test/e2e/incidents.test.ts', 'test/e2e/probes-forecast.test.ts', 'test/e2e/lab-eviction.test.ts']),
    ],
  },
});
