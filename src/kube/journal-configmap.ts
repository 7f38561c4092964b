import { EXIT, KrError, messageOf, quote } from '../core/errors.js';
import type { KubeAccess } from './types.js';
import { DNS_LABEL } from '../core/names.js';

/**
 * The in-cluster copy of run journals: one ConfigMap (created beforehand, e.g. by `kube-runbook manifests`), one key
 * `<run-id>.jsonl` per run holding that run's whole journal, and `<run-id>.hmac` its MAC (src/kube/journal-key.ts).
 * Written by JSON merge patch of those two keys at once, so runs never overwrite each other's keys, a journal never
 * goes without its MAC, and the ServiceAccount needs only `get` and `patch` on that one name.
 */
export interface ConfigMapRef {
  namespace: string;
  name: string;
}

/** What a ConfigMap key may be (and a run id is). */
const KEY = /^[-._a-zA-Z0-9]+$/;

/** `namespace/name` of a ConfigMap flag, checked before anything runs. */
export function configMapRef(flag: string, ref: string): ConfigMapRef {
  const [namespace = '', name = '', ...rest] = ref.split('/');
  if (rest.length || !DNS_LABEL.test(namespace) || !DNS_LABEL.test(name))
    throw new KrError('BAD_CONFIGMAP', `${flag} ${quote(ref)} is not namespace/name`, { exit: EXIT.invalid });
  return { namespace, name };
}

const path = (ref: ConfigMapRef) => `/api/v1/namespaces/${encodeURIComponent(ref.namespace)}/configmaps/${encodeURIComponent(ref.name)}`;

function api(kube: KubeAccess) {
  if (!kube.json) throw new KrError('KUBE_UNAVAILABLE', 'this cluster client cannot reach ConfigMaps', { exit: EXIT.refused });
  return kube.json.bind(kube);
}

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

/** The `data` of a ConfigMap (`what` names it in the error: the journal, the report); KrError exit 3 when it cannot be read. */
export async function readConfigMapData(
  kube: KubeAccess,
  ref: ConfigMapRef,
  what: string,
  signal?: AbortSignal,
): Promise<Record<string, string>> {
  try {
    return (await api(kube)<{ data?: Record<string, string> }>(path(ref), { timeoutMs: 15_000, signal })).data ?? {};
  } catch (e) {
    throw new KrError(
      `${what.toUpperCase()}_CONFIGMAP`,
      `cannot read the ${what} ConfigMap ${ref.namespace}/${ref.name}: ${messageOf(e)}`,
      { exit: EXIT.refused, cause: e },
    );
  }
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
  await api(kube)(path(ref), { method: 'PATCH', contentType: 'application/merge-patch+json', body: { data }, timeoutMs: 15_000, signal });
}
