import type { Clock } from '../core/clock.js';
import { KrError } from '../core/errors.js';

/** A kubeconfig's mapping, as YAML parses it. */
export type Obj = Record<string, unknown>;

/** The mapping `v` is, else an empty one. */
export const obj = (v: unknown): Obj => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Obj) : {});
/** The non-empty string `v` is, else undefined. */
export const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);

/** A kubeconfig or credential that cannot be used: exit 3. */
export function unavailable(message: string, cause?: unknown): KrError {
  return new KrError('KUBE_UNAVAILABLE', message, { exit: 3, cause });
}

/** How to trust a cluster: its CA (and the base64 text it came as), or no check; the name its certificate must bear. */
export interface Tls {
  ca?: Buffer;
  insecure: boolean;
  servername?: string;
  caData?: string;
}

/** What the credentials of a context are built with. */
export interface UserCtx {
  server: string;
  tls: Tls;
  clock: Clock;
  env: Record<string, string | undefined>;
  contextName: string;
}
