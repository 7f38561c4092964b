import type { RequestOptions } from './http.js';
import { ApiStatusError } from './source.js';

/** The path of a namespace's coordination.k8s.io Leases, or of one of them. */
export const leasePath = (ns: string, name?: string) =>
  `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(ns)}/leases${name ? `/${encodeURIComponent(name)}` : ''}`;

/** A time as a Lease's MicroTime: RFC 3339 with six fractional digits. */
export const microTime = (ms: number) => new Date(ms).toISOString().replace(/(\.\d{3})Z$/, '$1000Z');

/** One Lease as the apiserver gives it; undefined when there is none (404). */
export async function readLeaseIfAny<L>(
  json: <T>(path: string, options?: RequestOptions) => Promise<T>,
  ns: string,
  name: string,
  o: RequestOptions,
): Promise<L | undefined> {
  try {
    return await json<L>(leasePath(ns, name), o);
  } catch (e) {
    if (e instanceof ApiStatusError && e.status === 404) return undefined;
    throw e;
  }
}
