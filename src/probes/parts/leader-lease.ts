import { z } from 'zod';
import type { SlimLease } from '../../kube/resources.js';
import type { WatchHandle } from '../../kube/watch.js';

/** The `maxTransitions` parameter of the probes that watch leader Leases. */
export const maxTransitions = () =>
  z
    .number()
    .int()
    .min(0)
    .optional()
    .meta({ description: 'violated when a Lease changed leader more often than this while watched (absent: not checked)' });

/** A leader-election Lease as a probe reports it. */
export interface LeaderValue {
  holder: string | null;
  /** ms since the last renewal. */
  renewAgeMs: number | null;
  leaseDurationSeconds: number | null;
  /** Renewals and leader changes seen while watched. */
  renewals: number;
  transitions: number;
  /** The longest time between two renewals seen while watched: how late the leader renews at worst. */
  maxRenewGapMs: number | null;
}

/** A leader-election Lease judged at a moment: its value, and whether no leader holds it any more. */
export interface LeaderState {
  value: LeaderValue;
  /** The Lease exists: some leader has held it. */
  exists: boolean;
  /** No Lease, no holder, or not renewed within its duration: nobody leads. */
  expired: boolean;
  /** When the Lease runs out if not renewed again; undefined when it has. */
  expiresAt?: number;
  /** Its duration in ms (15 s when it does not say, client-go's default). */
  limitMs: number;
}

/**
 * Follows one leader-election Lease (kube-controller-manager's, kube-scheduler's) on its watch: renewals, leader
 * changes and the gaps between renewals, counted from when the watch is synced.
 */
export class LeaderLease {
  private renewals = 0;
  private transitions = 0;
  private maxGap: number | null = null;

  constructor(
    private readonly handle: WatchHandle<SlimLease>,
    readonly key: string,
  ) {
    let synced = handle.freshness().synced;
    // the last leader seen: a Lease given up (no holder) and taken by the next one is one change, not two
    let leader = handle.store.get(key)?.holder || undefined;
    handle.subscribe((c) => {
      if (c.type === 'synced') synced = true;
      if (c.type !== 'modified' && c.type !== 'added') return;
      const holder = c.object.holder || undefined;
      if (!synced) {
        leader = holder ?? leader;
        return;
      }
      const renewed = c.object.renewTime;
      if (renewed !== c.previous?.renewTime) {
        this.renewals++;
        const before = c.previous?.renewTime;
        if (renewed !== undefined && before !== undefined) this.maxGap = Math.max(this.maxGap ?? 0, renewed - before);
      }
      if (holder && leader && holder !== leader) this.transitions++;
      if (holder) leader = holder;
    });
  }

  judge(now: number): LeaderState {
    const l = this.handle.store.get(this.key);
    const counts = { renewals: this.renewals, transitions: this.transitions, maxRenewGapMs: this.maxGap };
    if (!l)
      return {
        value: { holder: null, renewAgeMs: null, leaseDurationSeconds: null, ...counts },
        exists: false,
        expired: true,
        limitMs: 15_000,
      };
    const age = l.renewTime === undefined ? null : now - l.renewTime;
    const limitMs = (l.durationSeconds ?? 15) * 1000;
    const expired = age === null || age > limitMs || !l.holder;
    return {
      value: { holder: l.holder ?? null, renewAgeMs: age, leaseDurationSeconds: l.durationSeconds ?? null, ...counts },
      exists: true,
      expired,
      expiresAt: !expired && l.renewTime !== undefined ? l.renewTime + limitMs : undefined,
      limitMs,
    };
  }
}
