import { describe, expect, it } from 'vitest';
import { Inventory } from '../inventory/schema.js';
import type { Ctx } from '../contract/context.js';
import { silentLogger } from '../core/logger.js';
import { FakeClock } from '../testing/fake-clock.js';
import { fakeKubeAccess } from '../testing/fake-access.js';
import { FakeNodes } from '../testing/fake-nodes.js';
import { testInventory } from '../testing/engine-harness.js';
import type { Reading } from '../contract/probe.js';
import command from './command.js';

function setup(handler: ConstructorParameters<typeof FakeNodes>[1]) {
  const clock = new FakeClock();
  const inventory = Inventory.parse(testInventory());
  const nodes = new FakeNodes(inventory.spec.nodes, handler);
  const abort = new AbortController();
  const ctx: Ctx = {
    runId: 't',
    clock,
    log: silentLogger,
    signal: abort.signal,
    dryRun: false,
    inventory,
    kube: fakeKubeAccess(clock),
    nodes,
  };
  return { clock, nodes, abort, ctx };
}

async function collect(ctx: Ctx, params: unknown, clock: FakeClock, count: number, stepMs: number): Promise<Reading[]> {
  const readings: Reading[] = [];
  const it = command.start(ctx, command.meta.params.parse(params))[Symbol.asyncIterator]();
  const pump = (async () => {
    while (readings.length < count) {
      const n = await it.next();
      if (n.done) break;
      readings.push(n.value);
    }
  })();
  await clock.runUntil(() => readings.length >= count, count * stepMs * 2, stepMs / 4);
  await pump;
  return readings;
}

describe('command probe', () => {
  it('reads exit 0 as ok, 1 as violated, anything else as unknown, at its interval, with the last line as detail', async () => {
    const codes = [0, 1, 2];
    const { clock, nodes, ctx } = setup(() => ({ code: codes.shift() ?? 0, stdout: 'first\nlast line\n', stderr: '' }));
    const readings = await collect(ctx, { node: 'node-1', run: 'check-something', interval: '5s' }, clock, 3, 5000);
    expect(readings.map((r) => r.status)).toEqual(['ok', 'violated', 'unknown']);
    expect(readings[0]!.detail).toBe('last line');
    expect(readings[1]!.at - readings[0]!.at).toBe(5000);
    expect(nodes.calls.map((c) => [c.node, c.script, c.options.timeoutMs])).toEqual([
      ['node-1', 'check-something', 10_000],
      ['node-1', 'check-something', 10_000],
      ['node-1', 'check-something', 10_000],
    ]);
  });

  it('runs on the executor machine when no node is named', async () => {
    const { clock, nodes, ctx } = setup(() => ({ code: 0, stdout: '', stderr: '' }));
    const [r] = await collect(ctx, { run: 'true' }, clock, 1, 5000);
    expect(r!.detail).toBe('exit 0');
    expect(nodes.calls[0]!.node).toBe('here');
  });

  it('an unreachable node or a timeout reads unknown, never ok', async () => {
    const { clock, ctx } = setup(() => {
      throw new Error('ssh: connect to host node-1 port 22: Connection refused');
    });
    const [r] = await collect(ctx, { node: 'node-1', run: 'true' }, clock, 1, 5000);
    expect(r).toMatchObject({ status: 'unknown', detail: expect.stringContaining('Connection refused') });
  });

  it('stops when the run stops', async () => {
    const { clock, abort, ctx } = setup(() => ({ code: 0, stdout: '', stderr: '' }));
    const it = command.start(ctx, command.meta.params.parse({ run: 'true', interval: '1s' }))[Symbol.asyncIterator]();
    await it.next();
    const next = it.next();
    abort.abort();
    await clock.advance(2000);
    expect((await next).done).toBe(true);
  });
});
