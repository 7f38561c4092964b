import { watches } from '../contract/access.js';
import { endpointSlicesVersion } from '../kube/discovery.js';
import { z } from 'zod';
import { reactive, watching } from '../contract/readings.js';
import { parseLabelSelector } from '../kube/labels.js';
import { workloadSpec } from '../kube/objects.js';
import { watchSpecs } from '../kube/resources.js';
import { labelSelectorParam } from './parts/label-selector.js';
import { defineProbe } from '../contract/probe.js';

const MinReady = z
  .union([
    z.number().int().min(0),
    z.string().regex(/^(100|[1-9]?\d)(\.\d+)?%$/, { message: 'expected a whole number or a percentage such as "80%"' }),
  ])
  .meta({ description: 'ready replicas (or ready endpoints) each one keeps: a number, or a percentage of those wanted such as "80%"' });

const Params = z.strictObject({
  kind: z.enum(['Deployment', 'StatefulSet', 'DaemonSet', 'Service']).meta({ description: 'what to watch' }),
  namespace: z.string().min(1).optional().meta({ description: 'only in this namespace (all namespaces when absent)' }),
  name: z.string().min(1).optional().meta({ description: 'only the one of this name' }),
  selector: labelSelectorParam().optional().meta({ description: 'only those whose labels match this selector' }),
  minReady: MinReady.default('100%'),
});

export interface WorkloadRow {
  name: string;
  ready: number;
  wanted: number;
  need: number;
}

/** How many of `wanted` must be ready: a number as given, a percentage rounded up. */
function needed(minReady: number | string, wanted: number): number {
  if (typeof minReady === 'number') return minReady;
  return Math.ceil((wanted * Number.parseFloat(minReady)) / 100 - 1e-9);
}

/** Ready replicas of workloads, or ready endpoints of Services, against a minimum: violated the moment one drops. */
export default defineProbe({
  meta: {
    id: 'workload-availability',
    summary: 'Ready replicas of Deployments, StatefulSets, DaemonSets, or ready endpoints of Services, at least N or a percentage.',
    description:
      'Watches the selected workloads (apps/v1) and judges on every event: each must have at least `minReady` ready ' +
      'replicas (status.readyReplicas; numberReady for a DaemonSet), a number or a percentage of those wanted ' +
      '(spec.replicas; desiredNumberScheduled for a DaemonSet), rounded up. For Services, the ready endpoints of their ' +
      'EndpointSlices count, and a percentage is of all their endpoints. Violated the moment one is below, or when none ' +
      'is selected. Unknown while the apiserver cannot be watched.',
    params: Params,
    access: [
      ...(['Deployment', 'StatefulSet', 'DaemonSet'] as const).map((kind) =>
        watches('apps', `${kind.toLowerCase()}s`, `watches ${kind}s`, {
          namespace: { param: 'namespace' },
          onlyIf: { param: 'kind', equals: kind },
        }),
      ),
      watches('', 'services', 'watches Services', { onlyIf: { param: 'kind', equals: 'Service' } }),
      watches('discovery.k8s.io', 'endpointslices', "counts the Services' ready endpoints", {
        onlyIf: { param: 'kind', equals: 'Service' },
      }),
    ],
    numbers: {
      what: '`ready`, the ready replicas (or endpoints) of all selected workloads, and `wanted`, those wanted (spec.replicas, or all endpoints)',
      of: (v: { ready: number; wanted: number }) => ({ ready: v.ready, wanted: v.wanted }),
    },
  },
  start(ctx, params) {
    const matches = params.selector ? parseLabelSelector(params.selector) : () => true;
    const inScope = (o: { namespace: string; name: string; labels: Record<string, string> }) =>
      (!params.namespace || o.namespace === params.namespace) && (!params.name || o.name === params.name) && matches(o.labels);
    const judgeRows = (rows: WorkloadRow[]) => {
      rows.sort((a, b) => a.name.localeCompare(b.name));
      const short = rows.filter((r) => r.ready < r.need);
      const unit = params.kind === 'Service' ? 'ready endpoints' : 'ready';
      const shown = (r: WorkloadRow) => `${r.name} ${r.ready}/${r.wanted} ${unit} (needs ${r.need})`;
      const detail = !rows.length
        ? `no ${params.kind} selected`
        : short.length
          ? `${short.length}/${rows.length} below minimum: ${short.slice(0, 3).map(shown).join(', ')}${short.length > 3 ? ', …' : ''}`
          : rows.length === 1
            ? shown(rows[0]!)
            : `${rows.length} ${params.kind}s at or above minimum; ready ${rows.reduce((n, r) => n + r.ready, 0)}/${rows.reduce((n, r) => n + r.wanted, 0)}`;
      return {
        status: !rows.length || short.length ? ('violated' as const) : ('ok' as const),
        value: { ready: rows.reduce((n, r) => n + r.ready, 0), wanted: rows.reduce((n, r) => n + r.wanted, 0), items: rows.slice(0, 50) },
        detail,
      };
    };
    if (params.kind === 'Service') {
      const specs = async () => ({
        services: watchSpecs.services(),
        slices: watchSpecs.endpointSlices(await endpointSlicesVersion(ctx.kube, ctx.signal)),
      });
      return watching(ctx, specs, ({ services, slices }, watches) =>
        reactive(ctx, {
          watches,
          judge() {
            const counts = new Map<string, { ready: number; total: number }>();
            for (const s of slices.store.values()) {
              const k = `${s.namespace}/${s.service}`;
              const c = counts.get(k) ?? { ready: 0, total: 0 };
              c.ready += s.ready;
              c.total += s.ready + s.notReady;
              counts.set(k, c);
            }
            const rows: WorkloadRow[] = [];
            for (const svc of services.store.values()) {
              if (!inScope(svc)) continue;
              const c = counts.get(`${svc.namespace}/${svc.name}`) ?? { ready: 0, total: 0 };
              rows.push({ name: `${svc.namespace}/${svc.name}`, ready: c.ready, wanted: c.total, need: needed(params.minReady, c.total) });
            }
            return judgeRows(rows);
          },
        }),
      );
    }
    const kind = params.kind;
    return watching(ctx, { workloads: workloadSpec(kind, params.namespace, params.selector) }, ({ workloads }, watches) =>
      reactive(ctx, {
        watches,
        judge() {
          const rows: WorkloadRow[] = [];
          for (const w of workloads.store.values())
            if (inScope(w))
              rows.push({ name: `${w.namespace}/${w.name}`, ready: w.ready, wanted: w.desired, need: needed(params.minReady, w.desired) });
          return judgeRows(rows);
        },
      }),
    );
  },
});
