import { z } from 'zod';
import { reactive, watching } from '../contract/readings.js';
import { watchSpecs } from '../kube/resources.js';
import { formatDuration } from '../core/duration.js';
import { defineProbe } from '../contract/probe.js';

const Params = z.strictObject({
  lease: z
    .string()
    .regex(/^[a-z0-9.-]+\/[a-z0-9.-]+$/, { message: 'expected namespace/name' })
    .default('kube-system/kube-controller-manager')
    .meta({ description: 'namespace/name of the leader-election Lease' }),
  maxTransitions: z
    .number()
    .int()
    .min(0)
    .optional()
    .meta({ description: 'violated when the leader changed more often than this while watched (absent: not checked)' }),
});

export interface LeaderValue {
  holder: string | null;
  /** ms since the last renewal. */
  renewAgeMs: number | null;
  leaseDurationSeconds: number | null;
  renewals: number;
  transitions: number;
}

/** Who leads kube-controller-manager (whose node lifecycle controller evicts) and whether it keeps renewing. */
export default defineProbe({
  meta: {
    access: [{ apiGroup: 'coordination.k8s.io', resource: 'leases', verbs: ['list', 'watch'], namespace: { param: 'lease' }, why: 'watches the leader-election Lease `lease`' }],
    id: 'controller-manager',
    summary: "The controller-manager's leader Lease: holder, renewals, leader changes.",
    description:
      "Watches kube-controller-manager's leader-election Lease. Ok while a holder renews it within its " +
      'leaseDurationSeconds; violated when it is not renewed in time (no controller-manager is leading: nothing taints ' +
      'nodes or evicts pods — what stopping it as a remediation is meant to achieve) or when there is no such Lease, ' +
      'and, with `maxTransitions`, when the leader changed more often than that. The value counts the renewals and ' +
      'leader changes seen. Unknown while the apiserver cannot be watched.',
    params: Params,
  },
  start(ctx, params) {
    const [ns, name] = params.lease.split('/') as [string, string];
    return watching(ctx, { lease: watchSpecs.lease(ns, name) }, ({ lease }, watches) => {
      let renewals = 0;
      let transitions = 0;
      let synced = lease.freshness().synced;
      lease.subscribe((c) => {
        if (c.type === 'synced') synced = true;
        if (!synced || (c.type !== 'modified' && c.type !== 'added')) return;
        if (c.object.renewTime !== c.previous?.renewTime) renewals++;
        if (c.previous && c.object.holder !== c.previous.holder) transitions++;
      });
      return reactive(ctx, {
        watches,
        judge(now) {
          const l = lease.store.get(`${ns}/${name}`);
          if (!l)
            return {
              status: 'violated',
              value: { holder: null, renewAgeMs: null, leaseDurationSeconds: null, renewals, transitions } satisfies LeaderValue,
              detail: `no Lease ${params.lease}: no controller-manager has led`,
            };
          const age = l.renewTime === undefined ? null : now - l.renewTime;
          const limit = (l.durationSeconds ?? 15) * 1000;
          const expired = age === null || age > limit || !l.holder;
          const flapping = params.maxTransitions !== undefined && transitions > params.maxTransitions;
          const value: LeaderValue = { holder: l.holder ?? null, renewAgeMs: age, leaseDurationSeconds: l.durationSeconds ?? null, renewals, transitions };
          const who = l.holder ?? 'nobody';
          const detail = expired
            ? `no leader: ${who} last renewed ${age === null ? 'never' : `${formatDuration(age)} ago`} (lease ${formatDuration(limit)})`
            : `${who} leads${transitions ? `, ${transitions} leader change${transitions === 1 ? '' : 's'}` : ''}${flapping ? ` (more than ${params.maxTransitions})` : ''}`;
          return {
            status: expired || flapping ? 'violated' : 'ok',
            value,
            detail,
            recheckAt: !expired && l.renewTime !== undefined ? l.renewTime + limit + 1 : undefined,
          };
        },
      });
    });
  },
});
