import type { Logger } from '../core/logger.js';
import { configMapCopy, openClusterCopy } from '../journal/cluster-copy.js';
import { Journal } from '../journal/journal.js';
import type { JournalKey } from '../journal/key.js';
import type { ConfigMapRef } from '../kube/configmap.js';
import type { KubeAccess } from '../kube/types.js';

const where = (ref: ConfigMapRef) => `ConfigMap ${ref.namespace}/${ref.name}`;

/**
 * The journal of a new run under `dir`, copied as it is written to the ConfigMap when one is given. That ConfigMap is
 * checked before anything is applied (a run that cannot keep its journal in the cluster does not start: KrError, exit
 * 3), and what earlier runs left in it is said: faults still applied (their pod went away), journals the key does
 * not sign.
 */
export async function openRunJournal(o: {
  kube: KubeAccess;
  runId: string;
  dir: string;
  configMap?: ConfigMapRef;
  log: Logger;
}): Promise<Journal> {
  const ref = o.configMap;
  if (!ref) return Journal.forRun(o.runId, o.dir);
  const cluster = await openClusterCopy(o.kube, ref, o.runId, o.log);
  for (const earlier of cluster.applied)
    o.log.warn(
      `run ${earlier.runId} left ${earlier.faults} fault(s) applied, by its journal in ${where(ref)} ` +
        `(its pod went away): revert them with kube-runbook recover --from-cluster ${ref.namespace}/${ref.name}`,
    );
  for (const runId of cluster.unsigned)
    o.log.warn(`the journal of run ${runId} in ${where(ref)} is not signed by the journal's key: recover --from-cluster refuses it`);
  return Journal.forRun(o.runId, o.dir, cluster.copy);
}

/**
 * The journal of an earlier run, taken from the ConfigMap by `recover --from-cluster`: what recover appends goes to
 * the ConfigMap too (signed by `key`, as the run's copy was), so the next recover does not take the run again.
 */
export function reopenClusterJournal(
  file: string,
  o: { kube: KubeAccess; runId: string; configMap: ConfigMapRef; key: JournalKey | undefined; log: Logger },
): Journal {
  return new Journal(file, configMapCopy(o.kube, o.configMap, o.runId, o.log, o.key));
}
