import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAction, type RevertState } from '../contract/action.js';
import type { InventoryInput } from '../inventory/schema.js';
import { shq } from '../core/shell.js';
import { checkHostile, HOSTILE_VALUES, runLifecycle, shellSandbox } from './action-tester.js';
import { inventoryOf } from './inventories.js';

const inventory: InventoryInput = inventoryOf({ layout: 'lab', lab: { stateDir: '/nonexistent' }, nodes: [{ name: 'n1' }] }, 't');

/** An action that writes `word` into its scripts with `quoteWith`. */
const echoAction = (quoteWith: (s: string) => string, state: (w: string) => RevertState = (w) => ({ word: w })) =>
  defineAction({
    meta: {
      access: [],
      id: 'echo-word',
      summary: 's',
      description: 'd',
      params: z.strictObject({ word: z.string().meta({ description: 'w' }) }),
      targets: 'nodes',
      defaultNodes: 'all',
      kind: 'fault',
      layouts: { kubeadm: 'k', k3s: 'k', lab: 'l' },
      undo: 'u',
    },
    prepare: async (_ctx, p) => state(p.word),
    apply: async (ctx, s) => {
      await ctx.nodes.exec('n1', `echo ${quoteWith(String(s.word))}`);
      return s;
    },
    revert: async (ctx, s) => {
      await ctx.nodes.exec('n1', `echo ${quoteWith(String(s.word))} >/dev/null`);
    },
    nodeSideRevert: (s) => `echo ${quoteWith(String(s.word))}`,
  });

describe('actionTester', () => {
  const scenario = (value: string) => ({ name: 'x', params: { word: value } });
  const caught = async (quoteWith: (s: string) => string) => {
    const results = await Promise.allSettled(HOSTILE_VALUES.map((t) => checkHostile(echoAction(quoteWith), { inventory }, scenario, t)));
    return results.filter((r) => r.status === 'rejected').map((r) => String((r as PromiseRejectedResult).reason));
  };

  it.each([
    ['spliced as is', (s: string) => s],
    ['in double quotes', (s: string) => `"${s}"`],
    ['in single quotes without escaping', (s: string) => `'${s}'`],
  ])('catches a value %s', async (_what, quoteWith) => {
    const failures = await caught(quoteWith);
    expect(failures.length).toBeGreaterThan(0);
    expect(failures.join('\n')).toMatch(/a hostile value was executed by/);
  });

  it('passes the same action when it quotes with shq, after running every script', async () => {
    expect(await caught(shq)).toEqual([]);
    const ok = await checkHostile(echoAction(shq), { inventory }, scenario, HOSTILE_VALUES[0]!);
    expect(ok.scripts.length).toBe(4); // apply, revert, revert again, node-side revert
  });

  it('refuses a state that does not survive a JSON round trip', async () => {
    const bad = echoAction(shq, (w) => ({ word: w, when: undefined as unknown as string }));
    await expect(runLifecycle(bad, inventory, { name: 'x', params: { word: 'a' } })).rejects.toThrow(/JSON round trip/);
  });

  it('refuses a script that does not parse', async () => {
    const bad = echoAction((s) => `${s} )`);
    await expect(runLifecycle(bad, inventory, { name: 'x', params: { word: 'a' } })).rejects.toThrow(/sh -n/);
  });

  it('reports the phase that failed', async () => {
    const r = runLifecycle(echoAction(shq), inventory, {
      name: 'x',
      params: { word: 'a' },
      handler: () => Promise.reject(new Error('node down')),
    });
    await expect(r).rejects.toMatchObject({ phase: 'apply' });
  });

  it('runs scripts in the sandbox with stubs that log their arguments', () => {
    const sb = shellSandbox({ iptables: { code: 4, stdout: 'chain exists' } });
    try {
      const r = sb.run('out=$(iptables -w -N "a b"); echo "$? $out"');
      expect(r.stdout).toBe('4 chain exists\n');
    } finally {
      sb.dispose();
    }
  });
});
