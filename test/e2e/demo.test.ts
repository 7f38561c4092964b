import { afterAll, describe, expect, it } from 'vitest';
import { LAB_VERSION, labBinaries, labCli, leftovers, stopLab } from './helpers/lab.js';

/**
 * The README's main command, as `npm run demo -- --compare` runs it once `npm run build` is done (the lab's `demo`
 * command: its own lab, both runs, its teardown), and the table the README gives from it: with guards nothing
 * evicted (the controller-manager's log) and nothing killed (containerd), every fault reverted, the remediation
 * applied and undone; without guards the cascade, the containers killed as many as the pods evicted, the forecast
 * early.
 */
const INSTANCE = 'e2edm';

afterAll(async () => {
  await stopLab(INSTANCE);
});

/** The block of `demo`'s outcome that starts with `label`, up to the next blank line. */
const block = (stdout: string, label: string) => {
  const from = stdout.indexOf(`\n${label}: `);
  expect(from, `the outcome of the run ${label}`).toBeGreaterThan(-1);
  return stdout.slice(from + 1).split('\n\n')[0]!;
};

describe('npm run demo -- --compare', () => {
  it('prints the outcome the README shows, on real nodes, and leaves no lab behind', async () => {
    await labBinaries();
    const r = await labCli(['demo', '--compare', '--instance', INSTANCE, '--kubernetes-version', LAB_VERSION], { timeoutMs: 1_500_000 });
    expect(r.code, r.stderr.slice(-3000)).toBe(0);
    expect(r.stdout).toContain("Nodes: 3 real nodes (the release's kubelet, containerd 2 and runc)");

    const guarded = block(r.stdout, 'with guards');
    expect(guarded).toMatch(/^with guards: PASSED \(exit 0\)/);
    expect(guarded).toContain("pods evicted:        0, counted from the controller-manager's log");
    expect(guarded).toMatch(/containers killed: {3}0\n {23}counted by containerd of rnode-1, rnode-2, rnode-3 .*; 6 running at the start/);
    expect(guarded).toContain('faults reverted:     3/3; remediations applied 1, undone 1');
    expect(guarded).toContain('nodes Ready at end:  3/3');
    expect(guarded).toMatch(/guard: {15}eviction forecast → remediate at /);
    expect(guarded).not.toMatch(/objective: .*(MISSED|UNKNOWN)/);

    const unguarded = block(r.stdout, 'without guards');
    const evicted = Number(/pods evicted: {8}(\d+) \(first at [\d:.]+\), counted from the controller-manager's log/.exec(unguarded)?.[1]);
    const killed = Number(/containers killed: {3}(\d+): /.exec(unguarded)?.[1]);
    expect(evicted, unguarded).toBeGreaterThan(0);
    expect(killed, unguarded).toBe(evicted);
    expect(unguarded).toContain('faults reverted:     3/3');
    expect(unguarded).toMatch(/the controller evicted at [\d:.]+ \(forecast [^)]* early\)/);

    expect(await leftovers(INSTANCE)).toEqual([]);
  }, 1_800_000);
});
