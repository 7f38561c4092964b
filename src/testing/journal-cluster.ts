import type { RequestOptions } from '../kube/http.js';
import { ApiStatusError } from '../kube/source.js';
import type { KubeAccess } from '../kube/types.js';

export const JOURNAL_REF = { namespace: 'kube-runbook', name: 'kube-runbook-rb-journal' };
const CM_PATH = `/api/v1/namespaces/${JOURNAL_REF.namespace}/configmaps/${JOURNAL_REF.name}`;
const SECRET_PATH = `/api/v1/namespaces/${JOURNAL_REF.namespace}/secrets/${JOURNAL_REF.name}-key`;

interface Stored {
  resourceVersion: number;
  data: Record<string, string>;
}

/**
 * The journal ConfigMap and its key Secret as the apiserver keeps them: GET, and JSON merge patch (null removes a
 * key; a resourceVersion in the patch must be the object's, else 409), 404 for a missing one, 403 for `forbidden`
 * ones and any other path. Every request is recorded.
 */
export function journalCluster(o: { configMap?: Record<string, string>; secret?: Record<string, string>; forbidden?: string[] } = {}) {
  const objects = new Map<string, Stored>();
  if (o.configMap) objects.set(CM_PATH, { resourceVersion: 1, data: o.configMap });
  if (o.secret) objects.set(SECRET_PATH, { resourceVersion: 1, data: o.secret });
  const calls: { path: string; method: string; body?: unknown }[] = [];
  const kube = {
    contextName: 'in-cluster',
    server: 'https://10.96.0.1:443',
    async json<T>(path: string, r: RequestOptions = {}): Promise<T> {
      calls.push({ path, method: r.method ?? 'GET', body: r.body });
      if ((path !== CM_PATH && path !== SECRET_PATH) || o.forbidden?.includes(path))
        throw new ApiStatusError(403, `${path} is forbidden`, 'Forbidden');
      const obj = objects.get(path);
      if (!obj) throw new ApiStatusError(404, `${path} not found`, 'NotFound');
      if (r.method === 'PATCH') {
        if (r.contentType !== 'application/merge-patch+json') throw new ApiStatusError(415, `unsupported ${r.contentType}`);
        const patch = r.body as { metadata?: { resourceVersion?: string }; data?: Record<string, string | null> };
        const rv = patch.metadata?.resourceVersion;
        if (rv !== undefined && rv !== String(obj.resourceVersion))
          throw new ApiStatusError(409, 'the object has been modified; please apply your changes to the latest version', 'Conflict');
        for (const [k, v] of Object.entries(patch.data ?? {}))
          if (v === null) delete obj.data[k];
          else obj.data[k] = v;
        obj.resourceVersion++;
      }
      return { metadata: { resourceVersion: String(obj.resourceVersion) }, data: { ...obj.data } } as T;
    },
    close() {},
  } as unknown as KubeAccess;
  return {
    kube,
    calls,
    /** The ConfigMap's data (empty when it does not exist). */
    get configMap(): Record<string, string> {
      return objects.get(CM_PATH)?.data ?? {};
    },
    get secret(): Record<string, string> | undefined {
      return objects.get(SECRET_PATH)?.data;
    },
    /** Someone else writes the Secret (a run starting at the same time). */
    writeSecret(data: Record<string, string>) {
      const s = objects.get(SECRET_PATH)!;
      s.data = data;
      s.resourceVersion++;
    },
  };
}
