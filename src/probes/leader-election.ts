import { watchesLeaderLeases } from '../contract/access.js';
import { z } from 'zod';
import { reactive, watching } from '../contract/readings.js';
import { defineProbe } from '../contract/probe.js';
import { formatDuration } from '../core/duration.js';
import { duration } from '../core/zod-helpers.js';
import { watchSpecs } from '../kube/resources.js';
import { LeaderLease, maxTransitions, type LeaderValue } from './parts/leader-lease.js';

const LeaseName = z.string().regex(/^[a-z0-9.-]+\/[a-z0-9.-]+$/, { message: 'expected namespace/name' });

const Params = z.strictObject({
  leases: z
    .array(LeaseName)
    .min(1)
    .default(['kube-system/kube-controller-manager', 'kube-system/kube-scheduler'])
    .meta({ description: 'namespace/name of each leader-election Lease watched' }),
  maxRenewAge: duration().prefault('10s').meta({
    description:
      "violated when a leader's last renewal is older than this: past its renew deadline (10 s for kube-controller-manager and kube-scheduler) a leader gives its lease up",
  }),
  maxLeaderless: duration()
    .prefault('0s')
    .meta({
      description:
        'how long a Lease its leader gave up cleanly (a shutdown, a graceful leader transition) may stay without a holder before it ' +
        'counts as lost: the next candidate takes a released Lease within its retry period (2 s for kube-controller-manager and ' +
        'kube-scheduler); 0s: at once. A Lease that ran out without being given up is lost at once either way',
    }),
  maxTransitions: maxTransitions(),
});

export interface LeaderElectionValue {
  leases: (LeaderValue & { lease: string })[];
}

/**
 * The leader Leases of the control plane's controllers: the earliest sign that an overloaded apiserver is about to
 * cost kube-controller-manager its leadership (incident 002: Endpoints stopped updating, nodes flapped) is its
 * renewals coming late, before the Lease runs out.
 */
export default defineProbe({
  meta: {
    access: [watchesLeaderLeases('leases', 'watches the leader-election Leases `leases`')],
    id: 'leader-election',
    summary: "The control plane's leader Leases (controller-manager, scheduler): holder, renewal age, leader changes.",
    description:
      "Watches leader-election Leases (by default kube-controller-manager's and kube-scheduler's). Ok while each has a " +
      'holder that renewed it within `maxRenewAge`, or was given up cleanly within `maxLeaderless`; violated when one was not renewed that recently (its leader is ' +
      'about to give it up, or has: no controller taints nodes, no scheduler places pods), when one does not exist, ' +
      'and, with `maxTransitions`, when one changed leader more often than that. The value gives per Lease its holder, ' +
      'the age of its last renewal, the longest gap between renewals seen, and the renewals and leader changes seen. ' +
      'Unknown while the apiserver cannot be watched.',
    params: Params,
  },
  start(ctx, params) {
    const specs = Object.fromEntries(
      params.leases.map((key) => {
        const [ns, name] = key.split('/') as [string, string];
        return [key, watchSpecs.lease(ns, name)];
      }),
    );
    return watching(ctx, specs, (handles, watches) => {
      const leaders = params.leases.map((key) => new LeaderLease(handles[key]!, key));
      return reactive(ctx, {
        watches,
        judge(now) {
          const problems: string[] = [];
          const fine: string[] = [];
          let recheckAt: number | undefined;
          const leases = leaders.map((leader) => {
            const { value, exists, expired, expiresAt } = leader.judge(now);
            const name = leader.key.split('/')[1]!;
            const age = value.renewAgeMs;
            const changes = value.transitions ? `, ${value.transitions} leader change${value.transitions === 1 ? '' : 's'}` : '';
            const released = exists && !value.holder && age !== null;
            if (!exists) problems.push(`${name}: no Lease ${leader.key}`);
            else if (released && age < params.maxLeaderless) {
              fine.push(`${name}: released ${formatDuration(age)} ago, being handed over`);
              recheckAt = Math.min(recheckAt ?? Infinity, now - age + params.maxLeaderless);
            } else if (expired) {
              const when = age === null ? 'never renewed' : `${formatDuration(age)} ago`;
              // a leader that shuts down cleanly gives its Lease up: no holder from then on
              problems.push(`${name}: no leader (${value.holder ? `${value.holder} last renewed it ${when}` : `released ${when}`})`);
            } else if (age !== null && age > params.maxRenewAge)
              problems.push(
                `${name}: ${value.holder} renewed ${formatDuration(age)} ago (more than ${formatDuration(params.maxRenewAge)})`,
              );
            else if (params.maxTransitions !== undefined && value.transitions > params.maxTransitions)
              problems.push(`${name}: ${value.holder} leads${changes} (more than ${params.maxTransitions})`);
            else fine.push(`${name}: ${value.holder} leads${changes}`);
            // judge again when the renewal turns too old, and when the Lease runs out
            if (expiresAt !== undefined && age !== null) {
              const tooOld = now - age + params.maxRenewAge + 1;
              for (const at of [tooOld, expiresAt + 1]) if (at > now) recheckAt = Math.min(recheckAt ?? Infinity, at);
            }
            return { lease: leader.key, ...value };
          });
          return {
            status: problems.length ? 'violated' : 'ok',
            value: { leases } satisfies LeaderElectionValue,
            detail: [...problems, ...fine].join('; '),
            recheckAt,
          };
        },
      });
    });
  },
});
