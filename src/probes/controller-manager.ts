import { watchesLeaderLeases } from '../contract/access.js';
import { z } from 'zod';
import { reactive, watching } from '../contract/readings.js';
import { watchSpecs } from '../kube/resources.js';
import { formatDuration } from '../core/duration.js';
import { defineProbe } from '../contract/probe.js';
import { LeaderLease, maxTransitions, type LeaderValue } from './parts/leader-lease.js';

const Params = z.strictObject({
  lease: z
    .string()
    .regex(/^[a-z0-9.-]+\/[a-z0-9.-]+$/, { message: 'expected namespace/name' })
    .default('kube-system/kube-controller-manager')
    .meta({ description: 'namespace/name of the leader-election Lease' }),
  maxTransitions: maxTransitions(),
});

export type { LeaderValue };

/** Who leads kube-controller-manager (whose node lifecycle controller evicts) and whether it keeps renewing. */
export default defineProbe({
  meta: {
    access: [watchesLeaderLeases('lease', 'watches the leader-election Lease `lease`')],
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
      const leader = new LeaderLease(lease, `${ns}/${name}`);
      return reactive(ctx, {
        watches,
        judge(now) {
          const { value, exists, expired, expiresAt, limitMs } = leader.judge(now);
          if (!exists) return { status: 'violated', value, detail: `no Lease ${params.lease}: no controller-manager has led` };
          const { transitions, renewAgeMs: age } = value;
          const flapping = params.maxTransitions !== undefined && transitions > params.maxTransitions;
          const who = value.holder ?? 'nobody';
          const detail = expired
            ? `no leader: ${who} last renewed ${age === null ? 'never' : `${formatDuration(age)} ago`} (lease ${formatDuration(limitMs)})`
            : `${who} leads${transitions ? `, ${transitions} leader change${transitions === 1 ? '' : 's'}` : ''}${flapping ? ` (more than ${params.maxTransitions})` : ''}`;
          return {
            status: expired || flapping ? 'violated' : 'ok',
            value,
            detail,
            recheckAt: expiresAt === undefined ? undefined : expiresAt + 1,
          };
        },
      });
    });
  },
});
