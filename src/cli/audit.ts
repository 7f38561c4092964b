import { realClock } from '../core/clock.js';
import { EXIT, KrError, isKrError, messageOf } from '../core/errors.js';
import type { Inventory } from '../inventory/schema.js';
import { resolveControllerSettings } from '../kube/controller-settings.js';
import { etcdTarget, scrapeEtcd } from '../kube/etcd-metrics.js';
import { type AuditFacts, audit } from '../kube/heartbeat-audit.js';
import { histogram, quantile } from '../kube/prometheus.js';
import { paths, zoneOf } from '../kube/resources.js';
import { formatDuration } from '../core/duration.js';
import type { Logger } from '../core/logger.js';
import { type DataFormat, formatData, isData, outputOption } from './formats.js';
import { out, stderrLogger } from './output.js';
import { inventoryFrom } from './setup.js';
import { connect } from './cluster.js';
import { makeCtx } from './ctx.js';
import type { CommandHelp, Register } from './types.js';

interface Options {
  inventory?: string;
  kubeconfig?: string;
  context?: string;
  etcdUrl?: string;
  etcdDirect?: boolean;
  output: 'text' | DataFormat;
  verbose?: boolean;
}

/** Without an inventory, the cluster alone is audited (settings from the version's defaults and the Leases). */
export const bare: Inventory = {
  apiVersion: 'kube-runbook/v1',
  kind: 'Inventory',
  metadata: { name: 'audit' },
  spec: { layout: 'kubeadm', transport: { type: 'local' }, nodes: [] },
};

interface List<T> {
  items: T[];
}
type NodeItem = { metadata: { name: string; labels?: Record<string, string> } };
type LeaseItem = { metadata: { name: string }; spec?: { leaseDurationSeconds?: number; renewTime?: string } };

export const register: Register = (program, done) => {
  program
    .command('audit')
    .description(
      "Read-only checks of the cluster's heartbeat settings (incident 3): grace vs lease renewals, monitor period, eviction rates, etcd latency.",
    )
    .option('-i, --inventory <file>', 'inventory file (default: $KUBE_RUNBOOK_INVENTORY; without one, only what the cluster itself shows)')
    .option('--kubeconfig <file>', "kubeconfig (default: the inventory's, else $KUBECONFIG)")
    .option('--context <name>', 'kubeconfig context')
    .option('--etcd-url <url>', "etcd's client or metrics URL (default: the layout's usual one, asked through the etcd node)")
    .option('--etcd-direct', 'ask etcd from this machine instead of through its node')
    .addOption(outputOption())
    .option('-v, --verbose', 'say where each setting was found and what could not be read')
    .action(async (o: Options) => {
      const a = await auditCluster(o, stderrLogger(o.verbose ?? false));
      const { checks, resolved } = a;
      const failed = checks.some((c) => c.verdict === 'fail');
      if (isData(o.output)) {
        out.stdout(formatData(o.output, auditData(a)));
      } else {
        const s = resolved.settings;
        out.stdout(
          `Heartbeat audit of context ${a.context}${resolved.version ? ` (Kubernetes ${resolved.version})` : ''}: ${a.nodes} nodes`,
        );
        out.stdout(
          `settings: grace ${formatDuration(s.nodeMonitorGracePeriodMs)} (${resolved.sources.nodeMonitorGracePeriodMs}), monitor period ${formatDuration(s.nodeMonitorPeriodMs)} (${resolved.sources.nodeMonitorPeriodMs}), ` +
            `lease ${formatDuration(s.leaseDurationMs)} (${resolved.sources.leaseDurationMs}), eviction rate ${s.nodeEvictionRate}/s (${resolved.sources.nodeEvictionRate})`,
        );
        if (o.verbose) for (const n of resolved.notes) out.stdout(`  note: ${n}`);
        for (const c of checks) out.stdout(`${c.verdict.toUpperCase().padEnd(7)} ${c.id.padEnd(16)} ${c.detail}`);
        const count = (v: string) => checks.filter((c) => c.verdict === v).length;
        out.stdout(
          `verdict: ${failed ? 'FAIL' : 'PASS'} (${count('fail')} fail, ${count('warn')} warn, ${count('unknown')} unknown, ${count('pass')} pass)`,
        );
      }
      done(failed ? EXIT.failed : EXIT.ok);
    });
};

/** What an audit found: the context, the settings as resolved (and where from), how many nodes, each check's verdict. */
export interface Audited {
  context: string;
  resolved: Awaited<ReturnType<typeof resolveControllerSettings>>;
  nodes: number;
  checks: ReturnType<typeof audit>;
}

/** What `audit -o json|yaml` prints (and the MCP server's audit tool hands out). */
export const auditData = (a: Audited) => ({
  context: a.context,
  version: a.resolved.version ?? null,
  settings: a.resolved.settings,
  sources: a.resolved.sources,
  checks: a.checks,
});

/** The heartbeat audit of the cluster of `o` (read-only): the cluster's Nodes and Leases, the settings, etcd's latency. */
export async function auditCluster(o: Omit<Options, 'output'>, log: Logger): Promise<Audited> {
  let inv: { inventory: Inventory; dir: string } | undefined;
  if (o.inventory || process.env.KUBE_RUNBOOK_INVENTORY) inv = await inventoryFrom(o);
  const inventory = inv?.inventory ?? bare;
  const kube = connect(o, inv, realClock, log);
  const ctx = makeCtx({ runId: 'audit', clock: realClock, log, signal: new AbortController().signal, inventory, kube });
  try {
    let nodes: List<NodeItem>;
    let leases: List<LeaseItem>;
    try {
      [nodes, leases] = await Promise.all([
        kube.raw(paths.nodes).then(json<List<NodeItem>>),
        kube.raw(paths.nodeLeases).then(json<List<LeaseItem>>),
      ]);
    } catch (e) {
      throw new KrError('KUBE_UNAVAILABLE', `the apiserver of context ${kube.contextName} does not answer: ${messageOf(e)}`, {
        exit: EXIT.refused,
      });
    }
    const resolved = await resolveControllerSettings(ctx);
    const now = realClock.now();
    const leaseOf = new Map(leases.items.map((l) => [l.metadata.name, l.spec]));
    const facts: AuditFacts = {
      settings: resolved.settings,
      sources: resolved.sources,
      nodes: nodes.items.map((n) => {
        const l = leaseOf.get(n.metadata.name);
        const renew = l?.renewTime ? Date.parse(l.renewTime) : undefined;
        return {
          name: n.metadata.name,
          zone: zoneOf(n.metadata.labels ?? {}),
          leaseDurationSeconds: l?.leaseDurationSeconds,
          leaseAgeMs: renew === undefined || Number.isNaN(renew) ? undefined : Math.max(0, now - renew),
        };
      }),
      etcd: await etcdFacts(ctx, o),
    };
    return { context: kube.contextName, resolved, nodes: facts.nodes.length, checks: audit(facts) };
  } finally {
    kube.close?.();
  }
}

function json<T>(r: { status: number; body: string }): T {
  if (r.status !== 200) throw new Error(`HTTP ${r.status}: ${r.body.slice(0, 200)}`);
  return JSON.parse(r.body) as T;
}

async function etcdFacts(ctx: ReturnType<typeof makeCtx>, o: Pick<Options, 'etcdUrl' | 'etcdDirect'>): Promise<AuditFacts['etcd']> {
  const where = etcdTarget(ctx, { url: o.etcdUrl, direct: o.etcdDirect });
  if (!where.node && !o.etcdDirect) return { error: 'no etcd or control-plane node in the inventory (give --etcd-url and --etcd-direct)' };
  try {
    const s = await scrapeEtcd(ctx, where, { timeout: 5000 });
    const p99 = (name: string) => {
      const q = quantile(0.99, histogram(s.metrics, name));
      return q === undefined ? null : Math.round(q * 10_000) / 10;
    };
    return {
      walFsyncP99Ms: p99('etcd_disk_wal_fsync_duration_seconds'),
      backendCommitP99Ms: p99('etcd_disk_backend_commit_duration_seconds'),
    };
  } catch (e) {
    return { error: isKrError(e) ? e.message : messageOf(e) };
  }
}

/** Where `--help` lists it, and its examples. */
export const help: CommandHelp = {
  group: 'Inspect',
  examples: [
    ['audit', "check the current context's heartbeat settings"],
    ['audit -i inventory.yaml -o json', "with the inventory's nodes, as JSON (or -o yaml)"],
  ],
};
