import type { TestProject } from 'vitest/node';
import { createLogger } from '../../../src/core/logger.js';
import { ensureLabBinaries } from '../../../packages/lab/src/index.js';

/**
 * Before any test of an e2e project: the lab's binaries for its Kubernetes version, built into the cache when
 * missing (about 10 minutes on 2 cores), so that no single test has to wait for a build within its own timeout.
 */
export default async function setup(project: TestProject): Promise<void> {
  const version = project.config.env?.KUBE_RUNBOOK_LAB_VERSION ?? process.env.KUBE_RUNBOOK_LAB_VERSION ?? '1.37';
  const log = createLogger((level, msg) => process.stderr.write(`[lab ${version}] ${level === 'info' ? '' : `${level}: `}${msg}\n`));
  await ensureLabBinaries({ log, kubernetesVersion: version });
}
