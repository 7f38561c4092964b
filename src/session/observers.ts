import type { ObserverProbe } from '../engine/access.js';
import { defaultRegistry } from '../engine/registry.js';

/**
 * What every run watches for its report (report.json: observations), guards or not: the pods deleted during the
 * run with their causes, and the eviction forecast's prediction, to compare with what happened; and every node's
 * Lease, Ready condition and NoExecute taints, for the timeline's node lanes (report.json: nodes). They share the
 * forecast's watches.
 */
export const POD_DELETIONS = 'pods deleted';
const FORECAST = 'eviction forecast';
/** The probes every run starts for its report, by the name the report gives them; each says what the report keeps of its readings (`meta.report`). */
const OBSERVERS: Record<string, { probe: string; with: Record<string, unknown> }> = {
  [POD_DELETIONS]: { probe: 'pod-deletions', with: {} },
  'node leases': { probe: 'node-leases', with: {} },
  'node ready': { probe: 'node-ready', with: {} },
  'NoExecute taints': { probe: 'noexecute-taints', with: {} },
  [FORECAST]: { probe: 'eviction-forecast', with: { margin: '0s' } },
};

/** The probes every run starts for its report; their permissions are checked at preflight and granted by `manifests`. */
export function runObservers(): Promise<ObserverProbe[]> {
  return Promise.all(
    Object.entries(OBSERVERS).map(async ([name, o]) => {
      const probe = await defaultRegistry.probe(o.probe);
      return { name, probe, params: probe.meta.params.parse(o.with) as Record<string, unknown> };
    }),
  );
}
