import { KrError, messageOf, quote } from '../core/errors.js';
import type { KubeAccess } from './types.js';

/** A resource type the apiserver serves, as its discovery document names it. */
export interface ApiResource {
  apiVersion: string;
  kind: string;
  /** The plural name in paths (`deployments`). */
  plural: string;
  namespaced: boolean;
}

interface ResourceList {
  resources?: { name?: string; kind?: string; namespaced?: boolean }[];
}

/** The discovery path of an apiVersion: `/api/v1` for the core group, `/apis/GROUP/VERSION` otherwise. */
const groupVersionPath = (apiVersion: string) => (apiVersion.includes('/') ? `/apis/${apiVersion}` : `/api/${apiVersion}`);

/**
 * Finds `kind` in the discovery document of `apiVersion` (one GET, no cache: a probe resolves its resource once
 * when it starts). Throws KUBE_RESOURCE_UNKNOWN when the apiserver does not serve it.
 */
export async function discoverResource(kube: KubeAccess, apiVersion: string, kind: string, signal?: AbortSignal): Promise<ApiResource> {
  if (!kube.json) throw new KrError('KUBE_NO_DISCOVERY', 'this cluster access cannot read discovery documents');
  let list: ResourceList;
  try {
    list = await kube.json<ResourceList>(groupVersionPath(apiVersion), { timeoutMs: 10_000, signal });
  } catch (e) {
    throw new KrError('KUBE_RESOURCE_UNKNOWN', `the apiserver does not serve ${quote(apiVersion)}: ${messageOf(e)}`, { exit: 3 });
  }
  const r = (list.resources ?? []).find((x) => x.kind === kind && x.name && !x.name.includes('/'));
  if (!r?.name) {
    const kinds = [...new Set((list.resources ?? []).filter((x) => x.name && !x.name.includes('/')).map((x) => x.kind))].sort();
    throw new KrError(
      'KUBE_RESOURCE_UNKNOWN',
      `${quote(apiVersion)} has no kind ${quote(kind)} (it serves: ${kinds.join(', ') || 'nothing'})`,
      { exit: 3 },
    );
  }
  return { apiVersion, kind, plural: r.name, namespaced: r.namespaced === true };
}

/** The collection path of a resource: in one namespace when it is namespaced and one is given, else cluster-wide. */
export function collectionPath(r: Pick<ApiResource, 'apiVersion' | 'plural' | 'namespaced'>, namespace?: string): string {
  const base = groupVersionPath(r.apiVersion);
  return r.namespaced && namespace ? `${base}/namespaces/${encodeURIComponent(namespace)}/${r.plural}` : `${base}/${r.plural}`;
}

/**
 * The EndpointSlice API version the apiserver serves: discovery.k8s.io/v1 (1.21+), else v1beta1. An apiserver that
 * cannot be asked is taken to serve v1; the watch then says what is wrong.
 */
export async function endpointSlicesVersion(kube: Pick<KubeAccess, 'raw'>, signal?: AbortSignal): Promise<'v1' | 'v1beta1'> {
  try {
    const r = await kube.raw('/apis/discovery.k8s.io/v1', { timeoutMs: 5000, signal });
    return r.status === 200 ? 'v1' : 'v1beta1';
  } catch {
    return 'v1';
  }
}
