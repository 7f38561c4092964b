import { describe, expect, it } from 'vitest';
import { readingFacts } from '../contract/node-facts.js';
import { readingNumbers } from '../contract/reading-numbers.js';
import type { RunEvent } from './events.js';
import { observe } from './observers.js';
import { baseRunbook, startTestRun } from '../testing/engine-harness.js';
import { ScriptedProbe } from '../testing/fake-modules.js';
import { ProbeTester } from '../testing/probe-tester.js';

const notReady = { kinds: ['ready'], facts: [{ kind: 'ready', node: 'node-1', status: 'False' }] };
/** The node facts a sink takes of a reading event: by the declaration it carries. */
const factsOf = (e: RunEvent) => ('reading' in e && 'nodeFacts' in e ? (readingFacts(e.nodeFacts, e.reading.value) ?? 'none') : 'none');
/** The numbers a sink takes of a reading event: by the declaration it carries. */
const numbersOf = (e: RunEvent) => ('reading' in e && 'numbers' in e ? (readingNumbers(e.numbers, e.reading.value) ?? 'none') : 'none');

describe("reading events carry their probe's declarations of node facts and numbers", () => {
  it("on a guard's and an expect step's readings; none for a reading without a value or a probe that declares none", async () => {
    const guard = new ScriptedProbe('ready', { status: 'ok', value: { notOk: ['node-1'] }, detail: '1 not Ready' }, { nodeFacts: true });
    const step = new ScriptedProbe(
      'steady',
      { status: 'ok', value: { notOk: ['node-1'] }, detail: 'steady' },
      { nodeFacts: true, numbers: true },
    );
    const plain = new ScriptedProbe('plain', { status: 'ok', value: { notOk: ['node-1'] }, detail: 'no facts' });
    const h = await startTestRun({
      runbook: baseRunbook({
        guards: [
          { probe: 'ready', onViolation: 'abort' },
          { probe: 'plain', onViolation: 'abort' },
        ],
        steps: [{ expect: { probe: 'steady' }, within: '1m' }, { wait: '10s' }],
      }),
      actions: [],
      probes: [guard.probe, step.probe, plain.probe],
    });
    await h.clock.advance(1000);
    guard.push('unknown', 'cannot tell', h.clock.now(), null);
    await h.clock.runUntil(() => h.events.some((e) => e.type === 'run-end'));
    const guardReadings = h.events.filter((e) => e.type === 'guard-reading');
    expect(guardReadings.filter((e) => e.guard === 'ready').map(factsOf)).toEqual([notReady, 'none']);
    expect(guardReadings.filter((e) => e.guard === 'plain').map((e) => 'nodeFacts' in e)).toEqual([false]);
    expect(h.events.filter((e) => e.type === 'step-reading').map(factsOf)).toEqual([notReady]);
    expect(h.events.filter((e) => e.type === 'step-reading').map(numbersOf)).toEqual([{ notOk: 1 }]);
    expect(guardReadings.map(numbersOf)).toEqual(['none', 'none', 'none']);
  });

  it("on an observer's readings", async () => {
    const t = new ProbeTester();
    const probe = new ScriptedProbe(
      'ready',
      { status: 'ok', value: { notOk: ['node-1'] }, detail: '1 not Ready' },
      { nodeFacts: true, numbers: true },
    );
    const events: RunEvent[] = [];
    const ac = new AbortController();
    const running = observe(t.ctx(ac.signal), [{ name: 'ready', probe: probe.probe, params: {} }], (e) => events.push(e));
    await t.advance(10);
    await running.stop();
    expect(events.filter((e) => e.type === 'observation').map(factsOf)).toEqual([notReady]);
    expect(events.filter((e) => e.type === 'observation').map(numbersOf)).toEqual([{ notOk: 1 }]);
    await t.close();
  });
});
