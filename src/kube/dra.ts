import type { RawObject } from './source.js';
import type { WatchSpec } from './watch-types.js';
import { arr, num, obj, str, time } from './resources.js';

/*
 * Dynamic Resource Allocation objects (resource.k8s.io/v1), as much of them as the device taint eviction controller
 * (pkg/controller/devicetainteviction) reads to decide when a pod is deleted: the devices a claim was allocated and
 * the tolerations copied into its allocation, the pods it is reserved for, and the NoExecute taints of devices, in
 * ResourceSlices or from DeviceTaintRules.
 */

/** A device taint (resource.k8s.io/v1 DeviceTaint). */
export interface SlimDeviceTaint {
  key: string;
  value?: string;
  effect: string;
  /** Set by the apiserver on create (and, in a rule, when the effect changes): the eviction counts from it. */
  timeAdded?: number;
}

/** A claim's toleration of device taints (resource.k8s.io/v1 DeviceToleration). */
export interface SlimDeviceToleration {
  key?: string;
  operator?: string;
  value?: string;
  effect?: string;
  seconds?: number;
}

/** One allocated device of a claim: `status.allocation.devices.results[]`. */
export interface AllocatedDevice {
  driver: string;
  pool: string;
  device: string;
  tolerations: SlimDeviceToleration[];
}

export interface SlimResourceClaim {
  namespace: string;
  name: string;
  /** Empty when it is not allocated. */
  allocated: AllocatedDevice[];
  /** The pods in `status.reservedFor` (the only consumers the controller evicts for; PodGroups are left out). */
  reservedFor: { name: string; uid: string }[];
}

/** A ResourceSlice: only its devices that carry taints are kept. */
export interface SlimResourceSlice {
  name: string;
  driver: string;
  pool: string;
  devices: { name: string; taints: SlimDeviceTaint[] }[];
}

export interface SlimDeviceTaintRule {
  name: string;
  /** Without a selector the rule selects no device (ruleMatchesDevice). */
  selects: boolean;
  driver?: string;
  pool?: string;
  device?: string;
  taint: SlimDeviceTaint;
}

const taintOf = (t: Record<string, unknown>): SlimDeviceTaint => ({
  key: str(t.key) ?? '',
  value: str(t.value),
  effect: str(t.effect) ?? '',
  timeAdded: time(t.timeAdded),
});

function slimClaim(o: RawObject): SlimResourceClaim {
  const m = obj(o.metadata);
  const status = obj(o.status);
  return {
    namespace: str(m.namespace) ?? '',
    name: str(m.name) ?? '',
    allocated: arr(obj(obj(status.allocation).devices).results).map((r) => ({
      driver: str(r.driver) ?? '',
      pool: str(r.pool) ?? '',
      device: str(r.device) ?? '',
      tolerations: arr(r.tolerations).map((t) => ({
        key: str(t.key),
        operator: str(t.operator),
        value: str(t.value),
        effect: str(t.effect),
        seconds: num(t.tolerationSeconds),
      })),
    })),
    reservedFor: arr(status.reservedFor)
      .filter((c) => (str(c.apiGroup) ?? '') === '' && c.resource === 'pods')
      .map((c) => ({ name: str(c.name) ?? '', uid: str(c.uid) ?? '' })),
  };
}

function slimSlice(o: RawObject): SlimResourceSlice {
  const spec = obj(o.spec);
  return {
    name: str(obj(o.metadata).name) ?? '',
    driver: str(spec.driver) ?? '',
    pool: str(obj(spec.pool).name) ?? '',
    devices: arr(spec.devices)
      .map((d) => ({ name: str(d.name) ?? '', taints: arr(d.taints).map(taintOf) }))
      .filter((d) => d.taints.length > 0),
  };
}

function slimRule(o: RawObject): SlimDeviceTaintRule {
  const spec = obj(o.spec);
  const selector = spec.deviceSelector && typeof spec.deviceSelector === 'object' ? obj(spec.deviceSelector) : undefined;
  return {
    name: str(obj(o.metadata).name) ?? '',
    selects: selector !== undefined,
    driver: str(selector?.driver),
    pool: str(selector?.pool),
    device: str(selector?.device),
    taint: taintOf(obj(spec.taint)),
  };
}

const RESOURCE_V1 = '/apis/resource.k8s.io/v1';

export const draWatchSpecs = {
  resourceClaims: (): WatchSpec<SlimResourceClaim> => ({
    key: 'resourceclaims/v1',
    path: `${RESOURCE_V1}/resourceclaims`,
    slim: slimClaim,
  }),
  resourceSlices: (): WatchSpec<SlimResourceSlice> => ({
    key: 'resourceslices/v1',
    path: `${RESOURCE_V1}/resourceslices`,
    slim: slimSlice,
  }),
  deviceTaintRules: (): WatchSpec<SlimDeviceTaintRule> => ({
    key: 'devicetaintrules/v1',
    path: `${RESOURCE_V1}/devicetaintrules`,
    slim: slimRule,
  }),
};
