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

/** What a journal says is left: 'clean' (ended, nothing applied), the number of faults still applied, or unreadable. */
function leftBy(text: string, runId: string): 'clean' | number | 'unreadable' {
  try {
    const view = parseJournal(text, runId);
    const left = outstanding(view).length;
    return view.status !== undefined && left === 0 ? 'clean' : left;
  } catch {
    return 'unreadable';
  }
}

/**
 * Before a run that copies its journal to the cluster: the ConfigMap can be read and written (else the run is refused,
 * exit 3, before anything is applied), and the journals of earlier runs that ended with nothing left applied are
 * removed, so the ConfigMap holds the runs `recover --from-cluster` may still need (and the last one's, until the next).
 * Returns the runs removed, and those whose journal says faults are still applied (a run whose pod went away).
 */
export async function prepareJournalConfigMap(
  kube: KubeAccess,
  ref: ConfigMapRef,
): Promise<{ removed: string[]; applied: { runId: string; faults: number }[] }> {
  const copies = await readJournalCopies(kube, ref);
  const left = [...copies].map(([runId, text]) => ({ runId, left: leftBy(text, runId) }));
  const removed = left.filter((l) => l.left === 'clean').map((l) => l.runId);
  try {
    await writeJournalCopies(kube, ref, Object.fromEntries(removed.map((runId) => [runId, null])));
  } catch (e) {
    throw new KrError('JOURNAL_CONFIGMAP', `cannot write the journal ${where(ref)}: ${messageOf(e)}`, { exit: EXIT.refused, cause: e });
  }
  return { removed, applied: left.flatMap((l) => (typeof l.left === 'number' && l.left > 0 ? [{ runId: l.runId, faults: l.left }] : [])) };
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
