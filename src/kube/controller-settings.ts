import { messageOf } from '../core/errors.js';
import type { Clock } from '../core/clock.js';
import type { Logger } from '../core/logger.js';
import type { ControllerSettings, Inventory } from '../inventory/schema.js';
import type { NodeAccess } from '../nodes/types.js';
import type { KubeAccess } from './types.js';
import { shq } from '../core/shell.js';
import { parseDuration } from '../core/duration.js';
import type { LifecycleSettings } from './versions.js';
import { httpGet } from './http-get.js';
import { parseKubeVersion, versionDefaults } from './versions.js';

/**
 * Where the node lifecycle controller's settings come from, in order: the inventory's `spec.controller`, the
 * controller-manager's `/configz`, its command line on a control-plane node (kubeadm static-pod manifest, k3s
 * config, lab run script), then the defaults of the server's Kubernetes version (grace 50 s since 1.32).
 */
export type SettingSource = 'inventory' | 'configz' | 'manifest' | 'observed' | 'defaults';
type Key = keyof LifecycleSettings;

export interface ResolvedSettings {
  settings: LifecycleSettings;
  sources: Record<Key, SettingSource>;
  /** The apiserver's gitVersion, when it answered. */
  version?: string;
  defaultTolerationSeconds: number;
  /** What could not be read, for the record. */
  notes: string[];
}

const FLAGS: Record<Key, { flag: string; configz: string; kind: 'duration' | 'number' }> = {
  nodeMonitorGracePeriodMs: { flag: 'node-monitor-grace-period', configz: 'nodemonitorgraceperiod', kind: 'duration' },
  nodeMonitorPeriodMs: { flag: 'node-monitor-period', configz: 'nodemonitorperiod', kind: 'duration' },
  nodeStartupGracePeriodMs: { flag: 'node-startup-grace-period', configz: 'nodestartupgraceperiod', kind: 'duration' },
  nodeEvictionRate: { flag: 'node-eviction-rate', configz: 'nodeevictionrate', kind: 'number' },
  secondaryNodeEvictionRate: { flag: 'secondary-node-eviction-rate', configz: 'secondarynodeevictionrate', kind: 'number' },
  unhealthyZoneThreshold: { flag: 'unhealthy-zone-threshold', configz: 'unhealthyzonethreshold', kind: 'number' },
  largeClusterSizeThreshold: { flag: 'large-cluster-size-threshold', configz: 'largeclustersizethreshold', kind: 'number' },
  leaseDurationMs: { flag: 'node-lease-duration-seconds', configz: 'nodeleasedurationseconds', kind: 'number' },
};

function fromInventory(c: ControllerSettings | undefined): Partial<LifecycleSettings> {
  if (!c) return {};
  return {
    nodeMonitorGracePeriodMs: c.nodeMonitorGracePeriod,
    nodeMonitorPeriodMs: c.nodeMonitorPeriod,
    nodeStartupGracePeriodMs: c.nodeStartupGracePeriod,
    nodeEvictionRate: c.nodeEvictionRate,
    secondaryNodeEvictionRate: c.secondaryNodeEvictionRate,
    unhealthyZoneThreshold: c.unhealthyZoneThreshold,
    largeClusterSizeThreshold: c.largeClusterSizeThreshold,
    leaseDurationMs: c.leaseDuration,
  };
}

function value(key: Key, raw: string | number): number | undefined {
  const { kind } = FLAGS[key];
  if (typeof raw === 'number') return key === 'leaseDurationMs' ? raw * 1000 : raw;
  const text = raw.trim().replace(/^["']|["']$/g, '');
  if (kind === 'duration') return parseDuration(text);
  const n = Number(text);
  if (!Number.isFinite(n)) return undefined;
  return key === 'leaseDurationMs' ? n * 1000 : n;
}

/** Settings found as `--flag=value`, `--flag value` or `flag=value` (k3s `kube-controller-manager-arg`) in any text. */
export function settingsFromFlags(text: string): Partial<LifecycleSettings> {
  const out: Partial<LifecycleSettings> = {};
  for (const key of Object.keys(FLAGS) as Key[]) {
    const re = new RegExp(`(?:^|[\\s"'\\[,]|--)${FLAGS[key].flag}(?:=|\\s+)([^\\s"',\\]]+)`, 'm');
    const m = re.exec(text);
    const v = m ? value(key, m[1]!) : undefined;
    if (v !== undefined) out[key] = v;
  }
  return out;
}

/** Settings in a /configz answer, whatever the case of its keys (Go field names in older versions). */
export function settingsFromConfigz(body: unknown): Partial<LifecycleSettings> {
  const found = new Map<string, unknown>();
  const walk = (o: unknown, depth: number) => {
    if (!o || typeof o !== 'object' || depth > 6) return;
    for (const [k, v] of Object.entries(o)) {
      if (v && typeof v === 'object') walk(v, depth + 1);
      else if (!found.has(k.toLowerCase())) found.set(k.toLowerCase(), v);
    }
  };
  walk(body, 0);
  const out: Partial<LifecycleSettings> = {};
  for (const key of Object.keys(FLAGS) as Key[]) {
    const raw = found.get(FLAGS[key].configz);
    const v = typeof raw === 'string' || typeof raw === 'number' ? value(key, raw) : undefined;
    if (v !== undefined) out[key] = v;
  }
  return out;
}

/** What resolving the settings reads: the inventory, the cluster, and the control-plane nodes. */
export interface SettingsCtx {
  inventory: Inventory;
  nodes: NodeAccess;
  clock: Clock;
  log: Logger;
  readonly kube: KubeAccess;
}

async function fromConfigz(ctx: SettingsCtx, notes: string[]): Promise<Partial<LifecycleSettings>> {
  const cps = ctx.inventory.spec.nodes.filter((n) => n.roles.includes('control-plane'));
  for (const n of cps) {
    const url = `https://${n.address ?? n.name}:10257/configz`;
    try {
      const creds = await ctx.kube.config.credentials();
      // The controller-manager's serving certificate is usually self-signed: without checking it, send only a client certificate.
      if (creds.headers.Authorization) throw new Error('only client-certificate credentials are sent to an unverified controller-manager');
      const a = await httpGet(url, { timeoutMs: 3000, clock: ctx.clock, cert: creds.cert, key: creds.key, insecure: true });
      if (a.status !== 200) throw new Error(`HTTP ${a.status}`);
      return settingsFromConfigz(JSON.parse(a.body));
    } catch (e) {
      notes.push(`configz ${url}: ${messageOf(e)}`);
    }
  }
  return {};
}

async function fromManifest(ctx: SettingsCtx, notes: string[]): Promise<Partial<LifecycleSettings>> {
  const { layout, lab } = ctx.inventory.spec;
  const cps = ctx.inventory.spec.nodes.filter((n) => n.roles.includes('control-plane'));
  for (const n of cps) {
    const script =
      layout === 'lab' && lab
        ? `cat ${shq(`${lab.stateDir}/nodes/${n.name}/kube-controller-manager/run`)} 2>/dev/null || true`
        : layout === 'k3s'
          ? 'cat /etc/rancher/k3s/config.yaml /etc/rancher/k3s/config.yaml.d/*.yaml 2>/dev/null; systemctl cat k3s 2>/dev/null; true'
          : 'cat /etc/kubernetes/manifests/kube-controller-manager.yaml 2>/dev/null || true';
    try {
      const r = await ctx.nodes.exec(n.name, script, { timeoutMs: 10_000 });
      const found = settingsFromFlags(r.stdout);
      if (Object.keys(found).length || r.stdout.includes('controller-manager')) return found;
    } catch (e) {
      notes.push(`manifest on ${n.name}: ${messageOf(e)}`);
    }
  }
  return {};
}

export interface ResolveOptions {
  /** leaseDurationSeconds seen on the nodes' Leases (ms). */
  observedLeaseDurationMs?: number;
  /** Skip /configz and the manifest (when the inventory already says everything, nothing is asked anyway). */
  offline?: boolean;
}

export async function resolveControllerSettings(ctx: SettingsCtx, o: ResolveOptions = {}): Promise<ResolvedSettings> {
  const notes: string[] = [];
  const layers: [SettingSource, Partial<LifecycleSettings>][] = [['inventory', fromInventory(ctx.inventory.spec.controller)]];
  const missing = () => (Object.keys(FLAGS) as Key[]).filter((k) => !layers.some(([, l]) => l[k] !== undefined));
  if (missing().length && !o.offline) layers.push(['configz', await fromConfigz(ctx, notes)]);
  if (missing().length && !o.offline) layers.push(['manifest', await fromManifest(ctx, notes)]);
  if (o.observedLeaseDurationMs) layers.push(['observed', { leaseDurationMs: o.observedLeaseDurationMs }]);
  let version: string | undefined;
  try {
    version = (await ctx.kube.raw('/version', { timeoutMs: 5000 }).then((r) => JSON.parse(r.body) as { gitVersion?: string })).gitVersion;
  } catch (e) {
    notes.push(`version: ${messageOf(e)}`);
  }
  layers.push(['defaults', versionDefaults(parseKubeVersion(version))]);
  const settings = {} as LifecycleSettings;
  const sources = {} as Record<Key, SettingSource>;
  for (const key of Object.keys(FLAGS) as Key[]) {
    const [source, layer] = layers.find(([, l]) => l[key] !== undefined)!;
    settings[key] = layer[key]!;
    sources[key] = source;
  }
  for (const n of notes) ctx.log.debug(`controller settings: ${n}`);
  return { settings, sources, version, defaultTolerationSeconds: ctx.inventory.spec.controller?.defaultTolerationSeconds ?? 300, notes };
}
