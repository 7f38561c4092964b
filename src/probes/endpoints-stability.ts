import { endpointSlicesVersion } from '../kube/discovery.js';
import { READ_PODS, watches } from '../contract/access.js';
import { z } from 'zod';
import { type Judgement, reactive, watching } from '../contract/readings.js';
import { type SlimEndpoints, type SlimPod, type SlimService, watchSpecs } from '../kube/resources.js';
import type { WatchHandle } from '../kube/watch.js';
import type { Change } from '../kube/watch-types.js';
import { formatDuration } from '../core/duration.js';
import { duration } from '../core/zod-helpers.js';
import { defineProbe } from '../contract/probe.js';

const Params = z.strictObject({
  kind: z.enum(['endpoints', 'endpointslices']).default('endpoints').meta({ description: 'watch Endpoints or EndpointSlices' }),
  namespaces: z.array(z.string().min(1)).min(1).optional().meta({ description: 'only Services in these namespaces (all when absent)' }),
  settle: duration()
    .prefault('5s')
    .meta({ description: 'how long endpoints may lag behind their pods, and how long a Service deletion may lag behind its endpoints’' }),
  max: z.number().int().min(0).default(0).meta({ description: 'violated when more incidents than this were seen' }),
});

export interface EndpointsIncident {
  service: string;
  /** Clock time the endpoints were deleted or emptied. */
  at: number;
  what: 'deleted' | 'emptied';
  readyPods: number;
}

interface Candidate {
  at: number;
  what: EndpointsIncident['what'];
}

/**
 * Endpoints that vanish while their Service exists and has ready pods: what a controller replaying an old watch
 * stream does (incident 2). A Service that is itself deleted takes its endpoints along: that is not counted.
 */
export default defineProbe({
  meta: {
    access: [
      watches('', 'services', 'watches the Services of every namespace'),
      watches('', 'endpoints', 'watches Endpoints (`kind: endpoints`)', { onlyIf: { param: 'kind', equals: 'endpoints' } }),
      watches('discovery.k8s.io', 'endpointslices', 'watches EndpointSlices', { onlyIf: { param: 'kind', equals: 'endpointslices' } }),
      READ_PODS,
    ],
    id: 'endpoints-stability',
    summary: 'Endpoints or EndpointSlices deleted or emptied while their Service exists and has ready pods.',
    description:
      'Watches Services, their Endpoints (or EndpointSlices) and Pods. An incident is endpoints deleted, or left with no ' +
      'ready address, while the Service still exists `settle` later and pods matching its selector are Ready — what the ' +
      'endpoints controller does when its watch replays the past (incident 2). A Service that has ready pods but no ready ' +
      'endpoints for longer than `settle` is reported as missing. Violated while any is missing or when more than `max` ' +
      'incidents were seen. Services without a selector are left out. Unknown while the apiserver cannot be watched.',
    params: Params,
  },
  start(ctx, params) {
    const specs = async () => ({
      services: watchSpecs.services(),
      endpoints:
        params.kind === 'endpoints' ? watchSpecs.endpoints() : watchSpecs.endpointSlices(await endpointSlicesVersion(ctx.kube, ctx.signal)),
      pods: watchSpecs.pods(),
    });
    return watching(ctx, specs, async function* ({ services, endpoints, pods }, watches) {
      const stability = new Stability(params, services, endpoints, pods);
      endpoints.subscribe((c) => stability.onEndpoints(c, ctx.clock.now()));
      stability.keepPods();
      yield* reactive(ctx, { watches, judge: (now) => stability.judge(now) });
    });
  },
});

type Params = z.output<typeof Params>;

/** A Service with ready pods and no ready endpoints, and since when. */
interface Missing {
  service: string;
  since: number;
  readyPods: number;
}

/** What the probe keeps between judgements: ready endpoints per Service, pods per namespace, incidents and their candidates. */
class Stability {
  private readonly inScope = (ns: string) => !this.params.namespaces || this.params.namespaces.includes(ns);
  // Ready endpoints per Service (Endpoints: one object; slices: the sum of its slices).
  private readonly readyOf = new Map<string, number>();
  private synced: boolean;
  private readonly candidates = new Map<string, Candidate>();
  private readonly podsByNs = new Map<string, Map<string, SlimPod>>();
  private readonly incidents: EndpointsIncident[] = [];
  private readonly missingSince = new Map<string, number>();

  constructor(
    private readonly params: Params,
    private readonly services: WatchHandle<SlimService>,
    private readonly endpoints: WatchHandle<SlimEndpoints>,
    private readonly pods: WatchHandle<SlimPod>,
  ) {
    this.synced = endpoints.freshness().synced;
    if (this.synced) this.countAll();
  }

  private recount(svc: string): { n: number; any: boolean } {
    if (this.params.kind === 'endpoints') {
      const e = this.endpoints.store.get(svc);
      return { n: e?.ready ?? 0, any: e !== undefined };
    }
    let n = 0;
    let any = false;
    for (const e of this.endpoints.store.values())
      if (`${e.namespace}/${e.service}` === svc) {
        any = true;
        n += e.ready;
      }
    return { n, any };
  }

  private countAll(): void {
    for (const e of this.endpoints.store.values())
      this.readyOf.set(`${e.namespace}/${e.service}`, this.recount(`${e.namespace}/${e.service}`).n);
  }

  /** A Service's endpoints deleted or emptied while the Service exists: a candidate, judged `settle` later. */
  onEndpoints(c: Change<SlimEndpoints>, at: number): void {
    if (c.type === 'synced') {
      this.synced = true;
      this.countAll();
      return;
    }
    if (c.type === 'freshness') return;
    const svc = `${c.object.namespace}/${c.object.service}`;
    const before = this.readyOf.get(svc) ?? 0;
    const now = this.recount(svc);
    if (now.any) this.readyOf.set(svc, now.n);
    else this.readyOf.delete(svc);
    if (!this.synced || !this.inScope(c.object.namespace) || !this.services.store.has(svc)) return;
    if (!now.any && c.type === 'deleted') this.candidates.set(svc, { at, what: 'deleted' });
    else if (before > 0 && now.n === 0) this.candidates.set(svc, { at, what: 'emptied' });
  }

  /** Keeps the pods by namespace, as they are now and as they change. */
  keepPods(): void {
    const { podsByNs } = this;
    for (const p of this.pods.store.values())
      podsByNs.set(p.namespace, (podsByNs.get(p.namespace) ?? new Map()).set(`${p.namespace}/${p.name}`, p));
    this.pods.subscribe((c) => {
      if (c.type !== 'added' && c.type !== 'modified' && c.type !== 'deleted') return;
      const ns = podsByNs.get(c.object.namespace) ?? new Map<string, SlimPod>();
      podsByNs.set(c.object.namespace, ns);
      if (c.type === 'deleted') ns.delete(c.key);
      else ns.set(c.key, c.object);
    });
  }

  private readyPods(s: SlimService): number {
    let n = 0;
    const sel = Object.entries(s.selector ?? {});
    for (const p of this.podsByNs.get(s.namespace)?.values() ?? [])
      if (p.ready && p.deletionTimestamp === undefined && sel.every(([k, v]) => p.labels[k] === v)) n++;
    return n;
  }

  judge(now: number): Judgement<{ incidents: EndpointsIncident[]; missing: Missing[] }> {
    const { incidents, services, params } = this;
    const settling = this.settleCandidates(now);
    const { missing, recheckAt } = this.findMissing(now);
    const parts: string[] = [];
    if (incidents.length)
      parts.push(
        `${incidents.length} incident${incidents.length === 1 ? '' : 's'}: ${incidents
          .slice(-3)
          .map((i) => `${i.service} ${i.what} with ${i.readyPods} ready pods`)
          .join(', ')}`,
      );
    if (missing.length)
      parts.push(
        `no ready endpoints: ${missing
          .slice(0, 3)
          .map((m) => `${m.service} for ${formatDuration(now - m.since)}`)
          .join(', ')}`,
      );
    return {
      status: incidents.length > params.max || missing.length ? 'violated' : 'ok',
      value: { incidents: incidents.slice(-50), missing },
      detail: parts.length ? parts.join('; ') : `endpoints of ${services.store.size} Services stable`,
      key: `${incidents.length}|${missing.map((m) => m.service).join(',')}|${services.store.size}`,
      recheckAt: Math.min(settling, recheckAt),
    };
  }

  /** Candidates `settle` old become incidents when their Service still exists with ready pods; returns when the next is due. */
  private settleCandidates(now: number): number {
    let recheckAt = Infinity;
    for (const [svc, cand] of this.candidates) {
      if (now < cand.at + this.params.settle) {
        recheckAt = Math.min(recheckAt, cand.at + this.params.settle);
        continue;
      }
      this.candidates.delete(svc);
      const s = this.services.store.get(svc);
      const ready = s?.selector ? this.readyPods(s) : 0;
      if (s && ready > 0) this.incidents.push({ service: svc, at: cand.at, what: cand.what, readyPods: ready });
    }
    return recheckAt;
  }

  /** The Services with ready pods and no ready endpoints for `settle` or longer, and when the next may be. */
  private findMissing(now: number): { missing: Missing[]; recheckAt: number } {
    const { missingSince, params } = this;
    let recheckAt = Infinity;
    const missing: Missing[] = [];
    for (const [key, s] of this.services.store) {
      if (!s.selector || !this.inScope(s.namespace) || (this.readyOf.get(key) ?? 0) > 0) {
        missingSince.delete(key);
        continue;
      }
      const ready = this.readyPods(s);
      if (ready === 0) {
        missingSince.delete(key);
        continue;
      }
      const since = missingSince.get(key) ?? now;
      missingSince.set(key, since);
      if (now - since >= params.settle) missing.push({ service: key, since, readyPods: ready });
      else recheckAt = Math.min(recheckAt, since + params.settle);
    }
    return { missing, recheckAt };
  }
}
