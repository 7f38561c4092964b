import { EXIT, KrError, messageOf } from '../core/errors.js';
import type { KubeAccess } from './types.js';

/** A ConfigMap a run writes to or a command reads from: the journal's copy, the report. */
export interface ConfigMapRef {
  namespace: string;
  name: string;
}

const path = (ref: ConfigMapRef) => `/api/v1/namespaces/${encodeURIComponent(ref.namespace)}/configmaps/${encodeURIComponent(ref.name)}`;

/** The client's JSON requests; a refusal (exit 3) when this client has none. */
function api(kube: KubeAccess) {
  if (!kube.json) throw new KrError('KUBE_UNAVAILABLE', 'this cluster client cannot reach ConfigMaps', { exit: EXIT.refused });
  return kube.json.bind(kube);
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

/** Sets (a string) or removes (null) the given keys of a ConfigMap's `data` by JSON merge patch, leaving every other key as it is. */
export async function patchConfigMapData(
  kube: KubeAccess,
  ref: ConfigMapRef,
  data: Record<string, string | null>,
  signal?: AbortSignal,
): Promise<void> {
  await api(kube)(path(ref), { method: 'PATCH', contentType: 'application/merge-patch+json', body: { data }, timeoutMs: 15_000, signal });
}

/**
 * The whole `data` of a ConfigMap by server-side apply, as field manager kube-runbook (replaced; needs patch, and
 * create when it does not exist yet).
 */
export async function applyConfigMapData(kube: KubeAccess, ref: ConfigMapRef, data: Record<string, string>): Promise<void> {
  await api(kube)(path(ref), {
    method: 'PATCH',
    contentType: 'application/apply-patch+yaml',
    query: { fieldManager: 'kube-runbook', force: true },
    body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: ref.name, namespace: ref.namespace }, data },
    timeoutMs: 30_000,
  });
}
