import type { KubeAccess } from '../kube/types.js';
import type { InventoryInput } from '../inventory/schema.js';
import { parseInventoryLoosely } from './loose-inventory.js';
import type { Action } from '../contract/action.js';
import type { Probe } from '../contract/probe.js';
import { Runbook } from '../runbook/schema.js';
import { type Confirmer, assumeYes } from '../engine/confirm.js';
import type { Ctx } from '../contract/context.js';
import type { RunEvent } from '../engine/events.js';
import type { Journal } from '../journal/journal.js';
import { memoryLogger } from '../core/logger.js';
import { buildPlan } from '../engine/static-checks.js';
import { registryOf } from '../contract/registry.js';
import { startRun, type RunHandle } from '../engine/run.js';
import { FakeClock } from './fake-clock.js';
import { type FakeKubeAccess, fakeKubeAccess } from './fake-access.js';
import { FakeNodes } from './fake-nodes.js';
import { inventoryOf } from './inventories.js';

export const testInventory = (nodes = ['cp-1', 'node-1', 'node-2', 'node-3']): InventoryInput =>
  inventoryOf({
    layout: 'lab',
    transport: { type: 'netns' },
    nodes: nodes.map((name) => ({ name, roles: name.startsWith('cp') ? ['control-plane'] : ['worker'] })),
  });

/** A run's ctx of fakes: a memory log, a signal never aborted, not a dry run. */
export const testCtx = (o: Pick<Ctx, 'runId' | 'clock' | 'inventory' | 'kube' | 'nodes'>): Ctx => ({
  ...o,
  log: memoryLogger(),
  signal: new AbortController().signal,
  dryRun: false,
});

export interface Harness {
  clock: FakeClock;
  nodes: FakeNodes;
  events: RunEvent[];
  ctx: Ctx;
  handle: RunHandle;
}

/** Plans and starts a run of `runbook` (a plain object, as YAML would give) against fakes. */
export async function startTestRun(o: {
  runbook: unknown;
  actions: Action[];
  probes: Probe[];
  journal?: Journal | null;
  confirmer?: Confirmer;
  inventory?: InventoryInput;
  clock?: FakeClock;
  nodes?: FakeNodes;
  context?: string;
  guards?: boolean;
  /** RBAC answers of the fake apiserver: true denies (default: everything allowed). */
  deny?: FakeKubeAccess['deny'];
  /** Another run's cluster (two runs at once); a cluster of its own by default. */
  kube?: KubeAccess;
  runId?: string;
  /** Also handed every event as it is emitted (an exporter under test, say). */
  observe?: (e: RunEvent) => void;
}): Promise<Harness> {
  const clock = o.clock ?? new FakeClock();
  const inventory = parseInventoryLoosely(o.inventory ?? testInventory());
  const runbook = Runbook.parse(o.runbook);
  const nodes =
    o.nodes ??
    new FakeNodes(inventory.spec.nodes, ({ script }) => ({
      code: 0,
      stdout: script.includes('kube-runbook-ok') ? 'kube-runbook-ok\n' : '',
      stderr: '',
    }));
  const fake = fakeKubeAccess(clock, { context: o.context ?? 'lab' });
  if (o.deny) fake.deny = o.deny;
  const kube = o.kube ?? fake;
  const ctx = testCtx({ runId: o.runId ?? 'run-test', clock, inventory, kube, nodes });
  const plan = await buildPlan({ runbook, file: 'test.yaml', inventory, registry: registryOf(o.actions, o.probes) });
  const events: RunEvent[] = [];
  const handle = startRun({
    plan,
    ctx,
    journal: o.journal ?? null,
    emit: (e) => {
      events.push(e);
      o.observe?.(e);
    },
    confirmer: o.confirmer ?? assumeYes,
    inventoryFile: 'inventory.yaml',
    guards: o.guards,
  });
  return { clock, nodes, events, ctx, handle };
}

export const baseRunbook = (spec: Record<string, unknown>) => ({
  apiVersion: 'kube-runbook/v1',
  kind: 'Runbook',
  metadata: { name: 'test' },
  // the engine's tests fault every node freely; spec.safety.maxUnavailable has tests of its own
  spec: { safety: { allowContexts: ['lab'], faultTtl: '1m', maxUnavailable: { controlPlane: '100%', worker: '100%' } }, ...spec },
});
