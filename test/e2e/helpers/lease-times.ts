import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CoordinationV1Api, KubeConfig } from '@kubernetes/client-node';
import { realClock } from '../../../src/core/clock.js';
import { klogTimeMs, parseKlogLine } from '../../../src/nodes/services/klog.js';
import type { LabInfo } from '../../../packages/lab/src/index.js';

/**
 * What the cluster itself says about a remediation's undo, apart from the executor: every node Lease's renewTime as the
 * apiserver stores it (read by this test's own client every 250 ms, so a renewal is seen whenever it is stored, also
 * when the list failed meanwhile, e.g. while the apiserver was down), and the moment the controller-manager says its
 * taint eviction started again (its own log line). Together they show whether evictions came back only once every
 * node heartbeated again.
 */
export class LeaseTimes {
  private readonly renewals = new Map<string, Set<number>>();
  private stopped = false;
  private readonly loop: Promise<void>;

  constructor(lab: LabInfo) {
    const kc = new KubeConfig();
    kc.loadFromFile(lab.kubeconfig);
    const api = kc.makeApiClient(CoordinationV1Api);
    this.loop = (async () => {
      while (!this.stopped) {
        try {
          const list = await api.listNamespacedLease({ namespace: 'kube-node-lease', timeoutSeconds: 2 });
          for (const l of list.items) {
            const at = l.spec?.renewTime ? new Date(l.spec.renewTime).getTime() : undefined;
            if (l.metadata?.name && at !== undefined) {
              const seen = this.renewals.get(l.metadata.name) ?? new Set<number>();
              seen.add(at);
              this.renewals.set(l.metadata.name, seen);
            }
          }
        } catch {
          // the apiserver is away (the outage rehearsed): renewals stored meanwhile are read once it answers
        }
        await realClock.sleep(250);
      }
    })();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.loop;
  }

  /** `node`'s last renewal at or before `at` (ms), if any was seen. */
  lastRenewalBy(node: string, at: number): number | undefined {
    const times = [...(this.renewals.get(node) ?? [])].filter((t) => t <= at);
    return times.length ? Math.max(...times) : undefined;
  }
}

/**
 * When the controller-manager started evicting for NoExecute taints again, from its own log after `sinceMs`: the
 * taint-eviction controller's start line (1.29+, after `disable-taint-eviction` is undone), else the node lifecycle
 * controller's, which evicts by itself before 1.29 (after `stop-controller-manager` is undone). The last one, so a
 * restart within the run is not taken for the undo.
 */
export async function evictionsBackAt(lab: LabInfo, sinceMs: number): Promise<number | undefined> {
  const text = await readFile(join(lab.stateDir, 'nodes', 'cp-1', 'kube-controller-manager', 'log'), 'utf8');
  let last: number | undefined;
  for (const line of text.split('\n')) {
    const l = parseKlogLine(line);
    if (l?.severity !== 'I') continue;
    const starts =
      /^"Starting" controller="taint-eviction-controller"/.test(l.message) ||
      /^Starting (node controller|NoExecuteTaintManager)/.test(l.message) ||
      /^"Starting node controller"/.test(l.message);
    if (!starts) continue;
    const at = klogTimeMs(l, sinceMs);
    if (at >= sinceMs) last = at;
  }
  return last;
}
