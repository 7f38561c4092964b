import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { EXIT, KrError, messageOf, quote } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import { type JournalCopy, outstanding, parseJournal } from './journal.js';
import { checkJournalText } from './schema.js';
import { type ConfigMapRef, patchConfigMapData, readConfigMapData } from '../kube/configmap.js';
import { ensureJournalKey, type JournalKey, journalKeySecret, readJournalKey } from './key.js';
import type { KubeAccess } from '../kube/types.js';

/**
 * The in-cluster copy of run journals: one ConfigMap (created beforehand, e.g. by `kube-runbook manifests`), one key
 * `<run-id>.jsonl` per run holding that run's whole journal, and `<run-id>.hmac` its MAC (src/journal/key.ts).
 * Written by JSON merge patch of those two keys at once, so runs never overwrite each other's keys, a journal never
 * goes without its MAC, and the ServiceAccount needs only `get` and `patch` on that one name.
 */

/** What a ConfigMap key may be (and a run id is). */
const KEY = /^[-._a-zA-Z0-9]+$/;

const checkedRunId = (runId: string): string => {
  if (!KEY.test(`${runId}.jsonl`))
    throw new KrError('BAD_RUN_ID', `run id ${quote(runId)} cannot name a ConfigMap key`, { exit: EXIT.invalid });
  return runId;
};

/** A run's journal as the ConfigMap keeps it: its text and, when its writer signed it, its MAC. */
interface JournalCopyText {
  text: string;
  mac?: string;
}

/** The journals of a ConfigMap's `data`, by run id: each `<run-id>.jsonl` with its `<run-id>.hmac` when there is one. */
function journalsIn(data: Record<string, string>): Map<string, JournalCopyText> {
  const out = new Map<string, JournalCopyText>();
  for (const [key, text] of Object.entries(data))
    if (key.endsWith('.jsonl')) {
      const runId = key.slice(0, -'.jsonl'.length);
      const mac = data[`${runId}.hmac`];
      out.set(runId, mac === undefined ? { text } : { text, mac });
    }
  return out;
}

/** Every journal in the ConfigMap, by run id. A ConfigMap that cannot be read is a refusal naming it. */
const readJournalCopies = async (kube: KubeAccess, ref: ConfigMapRef) => journalsIn(await readConfigMapData(kube, ref, 'journal'));

/**
 * Sets (text and MAC, in one patch) or removes (null) the journals of the given runs, leaving every other key as it is.
 * A journal set without a MAC has none in the ConfigMap.
 */
async function writeJournalCopies(
  kube: KubeAccess,
  ref: ConfigMapRef,
  journals: Record<string, JournalCopyText | null>,
  signal?: AbortSignal,
): Promise<void> {
  const data = Object.fromEntries(
    Object.entries(journals).flatMap(([runId, copy]) => [
      [`${checkedRunId(runId)}.jsonl`, copy && copy.text],
      [`${runId}.hmac`, copy?.mac ?? null],
    ]),
  );
  await patchConfigMapData(kube, ref, data, signal);
}

const where = (ref: ConfigMapRef) => `ConfigMap ${ref.namespace}/${ref.name}`;

/**
 * The journal of run `runId` copied to the ConfigMap as it is written, with its MAC by `key` (none without a key: a
 * `recover` of a copy trusted unsigned, when the Secret holds no key); a failing copy is said once until it works again.
 */
export function configMapCopy(kube: KubeAccess, ref: ConfigMapRef, runId: string, log: Logger, key: JournalKey | undefined): JournalCopy {
  let failing = false;
  return {
    async write(text) {
      await writeJournalCopies(kube, ref, { [runId]: { text, ...(key ? { mac: key.mac(ref, runId, text) } : {}) } });
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

/** A run's copy in the cluster, opened: its writer, and what the runs before it left in the ConfigMap. */
export interface OpenedCopy {
  copy: JournalCopy;
  /** Runs whose journals were removed: they ended with nothing left applied. */
  removed: string[];
  /** Runs whose signed journals say faults are still applied (their pod went away). */
  applied: { runId: string; faults: number }[];
  /** Runs with something left whose copy the key does not sign (`recover --from-cluster` refuses them). */
  unsigned: string[];
}

/**
 * Before a run that copies its journal to the cluster, in one pass: the journal's key (drawn into its Secret on the
 * first run); the copies of earlier runs read, and those that ended with nothing left applied removed, so the
 * ConfigMap holds the runs `recover --from-cluster` may still need (and the last one's, until the next); then the
 * writer of this run's copy. A ConfigMap that cannot be read or written refuses the run (exit 3) before anything is
 * applied.
 */
export async function openClusterCopy(kube: KubeAccess, ref: ConfigMapRef, runId: string, log: Logger): Promise<OpenedCopy> {
  const key = await ensureJournalKey(kube, ref);
  const data = await readConfigMapData(kube, ref, 'journal');
  const earlier = journalsIn(data);
  const left = [...earlier].map(([id, copy]) => ({ runId: id, left: leftBy(copy.text, id), signed: signedBy(key, ref, id, copy) }));
  // removing a journal runs nothing: a clean one goes, signed or not
  const removed = left.filter((l) => l.left === 'clean').map((l) => l.runId);
  try {
    await writeJournalCopies(kube, ref, Object.fromEntries(removed.map((id) => [id, null])));
  } catch (e) {
    throw new KrError('JOURNAL_CONFIGMAP', `cannot write the journal ${where(ref)}: ${messageOf(e)}`, { exit: EXIT.refused, cause: e });
  }
  const kept = left.filter((l) => l.left !== 'clean');
  return {
    copy: configMapCopy(kube, ref, runId, log, key),
    removed,
    applied: kept.flatMap((l) => (l.signed && typeof l.left === 'number' && l.left > 0 ? [{ runId: l.runId, faults: l.left }] : [])),
    unsigned: kept.filter((l) => !l.signed).map((l) => l.runId),
  };
}

const signedBy = (key: JournalKey, ref: ConfigMapRef, runId: string, copy: JournalCopyText): boolean =>
  copy.mac !== undefined && key.verifies(ref, runId, copy.text, copy.mac);

/**
 * `recover --from-cluster`: the journals of the ConfigMap (of run `runId` alone when given) written under `dir` where
 * this machine has none of the run or a shorter one (journals only grow), so recover reads them as its own; before
 * any is written, every one is checked: its MAC by the key in the Secret beside the ConfigMap, then every record's
 * shape and its inventory by the inventory file's schema. One that fails refuses the whole recover (KrError, exit 2;
 * exit 3 when the key cannot be read), before anything runs. A copy with no MAC (copied by an older version) is taken
 * only with `trustUnsigned`. Returns the runs taken and the key (for what recover writes back to the ConfigMap).
 */
export async function fetchJournalCopies(
  kube: KubeAccess,
  ref: ConfigMapRef,
  dir: string,
  o: { runId?: string; trustUnsigned?: boolean } = {},
): Promise<{ runs: Set<string>; key: JournalKey | undefined }> {
  const copies = [...(await readJournalCopies(kube, ref))].filter(([runId]) => o.runId === undefined || runId === o.runId);
  const signed = copies.some(([, c]) => c.mac !== undefined);
  // read when a copy needs it; otherwise only for signing what recover writes back, when the Secret can be read
  const key = signed ? await readJournalKey(kube, ref) : await readJournalKey(kube, ref).catch(() => undefined);
  for (const [runId, copy] of copies) {
    const what = `the journal of run ${runId} in ${where(ref)}`;
    if (copy.mac === undefined) {
      if (!o.trustUnsigned)
        throw new KrError(
          'JOURNAL_UNSIGNED',
          `${what} has no MAC (${runId}.hmac): copied by a version of kube-runbook that did not sign journals, or written by anyone who ` +
            'may write that ConfigMap; nothing was run. Recover the run from its own journal file where it ran ' +
            `(kube-runbook recover ${runId} --state-dir DIR), or, if only trusted identities can write ${where(ref)}, pass --trust-unsigned-journal`,
          { exit: EXIT.invalid },
        );
    } else if (!key) {
      const secret = journalKeySecret(ref);
      throw new KrError(
        'JOURNAL_UNVERIFIABLE',
        `${what} is signed, but Secret ${secret.namespace}/${secret.name} holds no key to check it with: nothing was run`,
        { exit: EXIT.invalid },
      );
    } else if (!key.verifies(ref, runId, copy.text, copy.mac))
      throw new KrError(
        'JOURNAL_NOT_AUTHENTIC',
        `${what} does not match its MAC (${runId}.hmac) by the key in Secret ${journalKeySecret(ref).namespace}/${journalKeySecret(ref).name}: ` +
          'it was changed, or written, by someone other than the run; nothing was run',
        { exit: EXIT.invalid },
      );
    await checkJournalText(copy.text, what, runId);
  }
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  for (const [runId, { text }] of copies) {
    const file = join(dir, `${runId}.jsonl`);
    const local = existsSync(file) ? readFileSync(file).length : -1;
    if (Buffer.byteLength(text) > local) writeFileSync(file, text, { mode: 0o600 });
  }
  return { runs: new Set(copies.map(([runId]) => runId)), key };
}
