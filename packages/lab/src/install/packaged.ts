import { EXIT, KrError } from 'kube-runbook/internal/core/errors.js';
import type { Logger } from 'kube-runbook/internal/core/logger.js';
import { shq } from 'kube-runbook/internal/core/shell.js';
import { run } from '../host/host.js';
import { ensureAptPackages } from './install.js';

/**
 * The path of `binary` (HAProxy, Prometheus: programs only some labs run); when it is not on PATH (nor in the
 * sbin directories), the Debian package `pkg` is installed first, through the lab installer's apt path and lock.
 */
export async function findPackagedBinary(binary: string, pkg: string, o: { log: Logger; signal?: AbortSignal }): Promise<string> {
  const where = async () => (await run('/bin/sh', ['-c', `PATH="$PATH:/usr/sbin:/sbin" command -v ${shq(binary)}`])).stdout.trim();
  const found = await where();
  if (found) return found;
  await ensureAptPackages([pkg], o);
  const after = await where();
  if (!after)
    throw new KrError('LAB_BINARIES_MISSING', `${binary} is not on PATH after installing the Debian package ${pkg}`, {
      exit: EXIT.refused,
    });
  return after;
}
