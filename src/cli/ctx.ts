import { randomBytes } from 'node:crypto';
import type { Clock } from '../core/clock.js';
import { EXIT, KrError } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import type { Ctx } from '../contract/context.js';
import type { Inventory } from '../inventory/schema.js';
import type { KubeAccess } from '../kube/types.js';
import { createNodeAccess } from '../nodes/access.js';
import { newAgentKeys } from '../nodes/agent-auth.js';

/** A run's id: when it started (UTC, to the second), its runbook's name, and four random hex digits. */
export function newRunId(name: string, now: number): string {
  const t = new Date(now)
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z');
  return `${t}-${name.slice(0, 40)}-${randomBytes(2).toString('hex')}`;
}

/** The ctx a command's modules touch: its run id, clock, log and signal, the inventory's nodes, the cluster. */
export function makeCtx(o: {
  runId: string;
  clock: Clock;
  log: Logger;
  signal: AbortSignal;
  inventory: Inventory;
  kube: KubeAccess;
  dryRun?: boolean;
}): Ctx {
  // drawn per process: what `recover` starts signs with keys of its own, and its agents are pods of their own
  const agentKeys = newAgentKeys();
  return {
    runId: o.runId,
    clock: o.clock,
    log: o.log,
    signal: o.signal,
    dryRun: o.dryRun ?? false,
    inventory: o.inventory,
    kube: o.kube,
    agentKeys,
    nodes: createNodeAccess(o.inventory, {
      log: o.log,
      clock: o.clock,
      runId: o.runId,
      keys: agentKeys,
      // read when a script goes to an agent, not before: a plan without a cluster never gets there
      api: {
        json: (path, options) => {
          if (!o.kube.json)
            throw new KrError('KUBE_UNAVAILABLE', 'this cluster client cannot reach the node agents', { exit: EXIT.refused });
          return o.kube.json(path, options);
        },
      },
    }),
  };
}
