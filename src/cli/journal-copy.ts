import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { EXIT, KrError, messageOf } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import { type JournalCopy, outstanding, parseJournal } from '../engine/journal.js';
import { type ConfigMapRef, readJournalCopies, writeJournalCopies } from '../kube/journal-configmap.js';
import type { KubeAccess } from '../kube/types.js';

const where = (ref: ConfigMapRef) => `ConfigMap ${ref.namespace}/${ref.name}`;

/** The journal of run `runId` copied to the ConfigMap as it is written; a failing copy is said once until it works again. */
export function configMapCopy(kube: KubeAccess, ref: ConfigMapRef, runId: string, log: Logger): JournalCopy {
  let failing = false;
  return {
    async write(text) {
      await writeJournalCopies(kube, ref, { [runId]: text });
      if (failing) log.warn(`the journal is copied to ${where(ref)} again`);
      failing = false;
    },
    failed(e) {
      if (!failing) log.warn(`the journal could not be copied to ${where(ref)} (tried again with the next record): ${messageOf(e)}`);
      failing = true;
    },
  };
}

/** Whether a journal's run ended with nothing left applied (a journal that cannot be read is kept). */
function endedClean(text: string, runId: string): boolean {
  try {
    const view = parseJournal(text, runId);
    return view.status !== undefined && outstanding(view).length === 0;
  } catch {
    return false;
  }
}

/**
 * Before a run that copies its journal to the cluster: the ConfigMap can be read and written (else the run is refused,
 * exit 3, before anything is applied), and the journals of earlier runs that ended with nothing left applied are
 * removed, so the ConfigMap holds the runs `recover --from-cluster` may still need (and the last one's, until the next).
 * Returns the runs removed.
 */
export async function prepareJournalConfigMap(kube: KubeAccess, ref: ConfigMapRef): Promise<string[]> {
  const copies = await readJournalCopies(kube, ref);
  const ended = [...copies].filter(([runId, text]) => endedClean(text, runId)).map(([runId]) => runId);
  try {
    await writeJournalCopies(kube, ref, Object.fromEntries(ended.map((runId) => [runId, null])));
  } catch (e) {
    throw new KrError('JOURNAL_CONFIGMAP', `cannot write the journal ${where(ref)}: ${messageOf(e)}`, { exit: EXIT.refused, cause: e });
  }
  return ended;
}

/**
 * `recover --from-cluster`: the journals of the ConfigMap written under `dir` where this machine has none of the run or
 * a shorter one (journals only grow), so recover reads them as its own. Returns the runs the ConfigMap holds.
 */
export async function fetchJournalCopies(kube: KubeAccess, ref: ConfigMapRef, dir: string): Promise<Set<string>> {
  const copies = await readJournalCopies(kube, ref);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  for (const [runId, text] of copies) {
    const file = join(dir, `${runId}.jsonl`);
    const local = existsSync(file) ? readFileSync(file).length : -1;
    if (Buffer.byteLength(text) > local) writeFileSync(file, text, { mode: 0o600 });
  }
  return new Set(copies.keys());
}
