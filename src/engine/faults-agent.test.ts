import { z } from 'zod';
import { describe, expect, it } from 'vitest';
import { defineAction } from '../contract/action.js';
import { KrError } from '../core/errors.js';
import { Inventory } from '../inventory/schema.js';
import type { KubeAccess } from '../kube/types.js';
import { FakeClock } from '../testing/fake-clock.js';
import { FakeNodes } from '../testing/fake-nodes.js';
import { testCtx } from '../testing/engine-harness.js';
import type { RunEvent } from './events.js';
import { FaultLedger } from './faults.js';
import { inventoryOf } from '../testing/inventories.js';

const inventory = Inventory.parse(
  inventoryOf(
    {
      layout: 'kubeadm',
      transport: { type: 'agent', namespace: 'kr-agents' },
      nodes: [{ name: 'node-1' }, { name: 'node-2', transport: { type: 'ssh' } }],
    },
    't',
  ),
);

/** An action that cuts its node off (isolatesNode yes): its apply script never gets an answer through the agent. */
const cutOff = defineAction({
  meta: {
    id: 'cut-off',
    summary: 's',
    description: 'd',
    params: z.strictObject({}),
    targets: 'nodes',
    kind: 'fault',
    undo: 'u',
    access: [],
    isolatesNode: () => 'yes',
  },
  prepare: async (ctx) => ({ node: ctx.node!.name }),
  apply: async (ctx, state) => {
    await ctx.nodes.exec(state.node, 'cut');
    return state;
  },
  revert: async (ctx, state) => {
    await ctx.nodes.exec(state.node, 'uncut');
  },
  nodeSideRevert: () => 'uncut',
});

function setup() {
  const clock = new FakeClock();
  const events: RunEvent[] = [];
  const nodes = new FakeNodes(inventory.spec.nodes, ({ script, options }) => {
    if (script === 'cut') {
      // the agent took the script, then the node went silent: the transport gives up after silenceMs
      expect(options.silenceMs).toBe(5000);
      throw new KrError('NODE_UNREACHABLE', 'node "node-1": its agent took the script and went silent for 5s', {
        transient: 'agent silence',
      });
    }
    return { code: 0, stdout: '', stderr: '' };
  });
  const ctx = testCtx({ runId: 'run-1', clock, inventory, kube: {} as KubeAccess, nodes });
  const ledger = new FaultLedger({ ctx, journal: null, emit: (e) => events.push(e), faultTtlMs: 20_000 });
  return { clock, events, nodes, ledger };
}

const on = { step: 's', remediation: false, signal: new AbortController().signal, deadline: Number.MAX_SAFE_INTEGER };

describe('faults on nodes reached through agents', () => {
  it('a fault that cuts its node off counts as applied when the agent goes silent after taking it, left to the dead-man', async () => {
    const { events, ledger } = setup();
    const fault = await ledger.apply(cutOff, {}, inventory.spec.nodes[0], on);
    expect(fault.deadman).toBe(true);
    expect(events.map((e) => e.type)).toEqual(['log', 'fault-applied']);
    expect(events[0]).toMatchObject({
      level: 'warn',
      message: expect.stringContaining(
        "went silent after taking the apply, as this fault cuts the node off from the apiserver: counted applied; the node's dead-man reverts it 20s after",
      ),
    });
  });

  it('the same silence on a node that the fault does not cut off is an apply failure', async () => {
    const { ledger, nodes } = setup();
    const plain = { ...cutOff, meta: { ...cutOff.meta, isolatesNode: () => 'no' as const } };
    nodes.handler = ({ script }) => {
      if (script === 'cut') throw new KrError('NODE_UNREACHABLE', 'silent', { transient: 'agent silence' });
      return { code: 0, stdout: '', stderr: '' };
    };
    await expect(ledger.apply(plain, {}, inventory.spec.nodes[0], on)).rejects.toThrow('silent');
  });

  it("the executor's keepalive skips nodes reached through agents (they follow the run Lease) and touches the others", async () => {
    const { ledger, nodes } = setup();
    const quiet = { ...cutOff, meta: { ...cutOff.meta, isolatesNode: undefined }, apply: async (_ctx: unknown, s: { node: string }) => s };
    await ledger.apply(quiet as never, {}, inventory.spec.nodes[0], on);
    await ledger.apply(quiet as never, {}, inventory.spec.nodes[1], on);
    nodes.calls.length = 0;
    await ledger.keepalive(new AbortController().signal, Number.MAX_SAFE_INTEGER);
    expect(nodes.calls.map((c) => c.node)).toEqual(['node-2']);
    expect(nodes.calls[0]!.script).toContain('/var/lib/kube-runbook/deadman/run-1');
  });
});
