import { silentLogger, type Logger } from 'kube-runbook/internal/core/logger.js';
import { findLabBinaries, parseLabVersion } from './binaries.js';
import { have } from '../host/host.js';
import type { LabBinariesInfo } from '../host/info.js';
import { installLab } from './install.js';

/** Commands `lab up` and the service scripts use. */
const LAB_TOOLS = ['ip', 'iptables', 'openssl', 'curl', 'setsid', 'socat', 'nsenter'];

export interface EnsureOptions {
  log?: Logger;
  /** 1.37 (default), 1.34, 1.20, or an exact patch of the first two. */
  kubernetesVersion?: string;
  binDir?: string;
  cacheDir?: string;
  signal?: AbortSignal;
}

/**
 * The lab's binaries for a Kubernetes version, installing what is missing: instant when `--bin-dir`,
 * KUBEBUILDER_ASSETS or the cache has them (and etcd); otherwise apt-get and a build (see installLab).
 */
export async function ensureLabBinaries(o: EnsureOptions = {}): Promise<LabBinariesInfo> {
  const log = o.log ?? silentLogger;
  const release = o.binDir ? undefined : parseLabVersion(o.kubernetesVersion);
  const found = await findLabBinaries({ binDir: o.binDir, cacheDir: o.cacheDir, log, release });
  if (found?.etcd && !(await missingLabTools()).length) return found;
  return installLab({ log, binDir: o.binDir, cacheDir: o.cacheDir, signal: o.signal, kubernetesVersion: o.kubernetesVersion });
}

/** The commands of LAB_TOOLS this machine lacks (`lab install` installs them). */
export async function missingLabTools(): Promise<string[]> {
  const found = await Promise.all(LAB_TOOLS.map(have));
  return LAB_TOOLS.filter((_, i) => !found[i]);
}
