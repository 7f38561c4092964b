/**
 * What the shared watch helper needs from the cluster: paged lists, watch streams and a cheap liveness request.
 * The real one speaks HTTP to the apiserver (http-source.ts); tests feed recorded streams (fake-source.ts).
 */

/** A raw Kubernetes object as the apiserver sends it; only `metadata` is relied upon here. */
export interface RawObject {
  metadata?: {
    name?: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
    [k: string]: unknown;
  };
  [k: string]: unknown;
}

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';

export interface WatchEvent {
  type: WatchEventType;
  object: RawObject;
}

export interface ListPage {
  items: RawObject[];
  resourceVersion: string;
  /** Set when more pages follow. */
  continue?: string;
}

export interface Selection {
  /** A collection path such as `/api/v1/nodes` or `/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases`. */
  path: string;
  labelSelector?: string;
  fieldSelector?: string;
}

export interface ListRequest extends Selection {
  limit: number;
  continue?: string;
  signal: AbortSignal;
}

export interface WatchRequest extends Selection {
  resourceVersion: string;
  timeoutSeconds: number;
  allowWatchBookmarks: true;
  /**
   * Watch-list: the server first sends every object as ADDED (from its watch cache, at least as new as
   * `resourceVersion`: resourceVersionMatch=NotOlderThan), then a BOOKMARK annotated INITIAL_EVENTS_END, then changes.
   */
  sendInitialEvents?: true;
  signal: AbortSignal;
}

/** The annotation of the BOOKMARK that ends a watch-list's initial events. */
export const INITIAL_EVENTS_END = 'k8s.io/initial-events-end';

export interface ListWatchSource {
  list(req: ListRequest): Promise<ListPage>;
  /**
   * Opens a watch. The promise resolves once the server has accepted it (the stream is open); the iterable then
   * yields events until the server closes the stream (iteration ends) or the connection fails (iteration throws).
   */
  watch(req: WatchRequest): Promise<AsyncIterable<WatchEvent>>;
  /**
   * Whether to ask this apiserver for watch-lists (`sendInitialEvents`). A server that knows the parameter but has
   * the WatchList feature off refuses such a watch (400/422), and the reflector lists instead.
   */
  streamsInitialEvents?(signal: AbortSignal): Promise<boolean>;
  /** A cheap request that proves the apiserver answers (e.g. GET /version). */
  ping(signal: AbortSignal): Promise<void>;
}

/** An HTTP answer other than 2xx from the apiserver; `status` 410 means the resourceVersion is too old. */
export class ApiStatusError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly reason?: string,
    /** The Status's `details.retryAfterSeconds`: the apiserver says to try again (429, or a 5xx it expects to pass). */
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
    this.name = 'ApiStatusError';
  }
}

export function isGone(e: unknown): boolean {
  return e instanceof ApiStatusError && e.status === 410;
}

/** The Status object of an ERROR watch event as an error. */
export function statusError(object: RawObject): ApiStatusError {
  const code = typeof object.code === 'number' ? object.code : 500;
  const message = typeof object.message === 'string' ? object.message : 'watch error';
  const reason = typeof object.reason === 'string' ? object.reason : undefined;
  return new ApiStatusError(code, message, reason);
}

/**
 * Orders two resourceVersions. They are opaque to clients, but every apiserver backed by etcd hands out decimal
 * revisions; when either is not decimal the order is unknown (undefined) and the caller must not assume one.
 */
export function compareResourceVersions(a: string, b: string): -1 | 0 | 1 | undefined {
  if (a === b) return 0;
  if (!/^\d+$/.test(a) || !/^\d+$/.test(b)) return undefined;
  const x = BigInt(a);
  const y = BigInt(b);
  return x < y ? -1 : x > y ? 1 : 0;
}

/** `namespace/name`, or `name` for cluster-scoped objects. */
export function objectKey(object: RawObject): string {
  const name = object.metadata?.name ?? '';
  const ns = object.metadata?.namespace;
  return ns ? `${ns}/${name}` : name;
}
