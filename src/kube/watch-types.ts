import { type BackoffOptions, defaultBackoff } from './backoff.js';
import type { RawObject, Selection } from './source.js';

/** The shapes shared by the hub (watch.ts) and each resource's reflector (reflector.ts). */

export interface WatchSpec<T> extends Selection {
  /** Probes asking for the same key share one watch. */
  key: string;
  /** Keeps only what probes need of each object. */
  slim(object: RawObject): T;
}

export type Change<T> =
  | { type: 'added' | 'modified' | 'deleted'; key: string; object: T; previous?: T; relist: boolean }
  | { type: 'synced' }
  | { type: 'freshness'; fresh: boolean; reason: string };

export type WatchState = 'listing' | 'watching' | 'reconnecting' | 'failing' | 'stopped';

export interface Freshness {
  fresh: boolean;
  synced: boolean;
  state: WatchState;
  /** Why it is not fresh, or what it is doing. */
  reason: string;
  /** Last time anything came from the apiserver (clock ms). */
  lastContactAt?: number;
}

export interface WatchStats {
  lists: number;
  watches: number;
  events: number;
  gone: number;
  failures: number;
  inactivityRestarts: number;
  replaysDropped: number;
  staleListsRefused: number;
  /** Initial states read as a watch-list's initial events instead of a list. */
  streamedLists: number;
}

export interface WatchOptions {
  pageSize: number;
  /** The watch request's timeoutSeconds is drawn in [min, 2·min). */
  minTimeoutSeconds: number;
  backoff: BackoffOptions;
  /** A watch stream without any event (bookmarks included) for this long is restarted. */
  inactivityMs: number;
  /** When nothing came from the apiserver for this long, it is pinged. */
  pingAfterMs: number;
  pingTimeoutMs: number;
  /** Data older than this (no contact with the apiserver) is stale: probes read unknown. */
  staleAfterMs: number;
  random: () => number;
}

export const defaultWatchOptions: WatchOptions = {
  pageSize: 500,
  minTimeoutSeconds: 300,
  backoff: defaultBackoff,
  inactivityMs: 90_000,
  pingAfterMs: 2_000,
  pingTimeoutMs: 2_000,
  staleAfterMs: 5_000,
  random: Math.random,
};
