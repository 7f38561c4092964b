import { silentLogger, type Logger } from '../../core/logger.js';
import { findLabBinaries } from './binaries.js';
import { have } from '../host/host.js';
import type { LabBinariesInfo } from '../host/info.js';
import { installLab } from './install.js';

/** Commands `lab up` and the service scripts use. */
const LAB_TOOLS = ['ip', 'iptables', 'openssl', 'curl', 'setsid'];

export interface EnsureOptions {
  log?: Logger;
  binDir?: string;
  cacheDir?: string;
  signal?: AbortSignal;
}

/**
 * The lab's binaries, installing what is missing: instant when `--bin-dir`, KUBEBUILDER_ASSETS or the cache
 * has them (and etcd is installed); otherwise apt-get and a build from source (about 8 minutes on 2 cores).
 */
export async function ensureLabBinaries(o: EnsureOptions = {}): Promise<LabBinariesInfo> {
  const log = o.log ?? silentLogger;
  const found = await findLabBinaries({ binDir: o.binDir, cacheDir: o.cacheDir, log });
  const tools = await Promise.all(LAB_TOOLS.map(have));
  if (found?.etcd && tools.every(Boolean)) return found;
  return installLab({ log, binDir: o.binDir, cacheDir: o.cacheDir, signal: o.signal });
}
