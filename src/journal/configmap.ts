import { EXIT, KrError, quote } from '../core/errors.js';
import { type ConfigMapRef, patchConfigMapData, readConfigMapData } from '../kube/configmap.js';
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
export interface JournalCopyText {
  text: string;
  mac?: string;
}

/** Every journal in the ConfigMap, by run id. A ConfigMap that cannot be read is a refusal naming it. */
export async function readJournalCopies(kube: KubeAccess, ref: ConfigMapRef, signal?: AbortSignal): Promise<Map<string, JournalCopyText>> {
  const data = await readConfigMapData(kube, ref, 'journal', signal);
  const out = new Map<string, JournalCopyText>();
  for (const [key, text] of Object.entries(data))
    if (key.endsWith('.jsonl')) {
      const runId = key.slice(0, -'.jsonl'.length);
      const mac = data[`${runId}.hmac`];
      out.set(runId, mac === undefined ? { text } : { text, mac });
    }
  return out;
}

/**
 * Sets (text and MAC, in one patch) or removes (null) the journals of the given runs, leaving every other key as it is.
 * A journal set without a MAC has none in the ConfigMap.
 */
export async function writeJournalCopies(
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
