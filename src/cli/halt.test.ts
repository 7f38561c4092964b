import { mkdirSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { memoryLogger } from '../core/logger.js';
import { FakeClock } from '../testing/fake-clock.js';
import { fakeKubeAccess } from '../testing/fake-access.js';
import { tempDirEach } from '../testing/temp-dir.js';
import { readHalt, setHalt } from '../kube/halt.js';
import { type HaltDeps, haltCommand, type HaltFlags, haltLine } from './halt.js';
import { resumeCommand } from './resume.js';
import { statusCommand } from './status.js';
import { out } from './output.js';

const flags = (o: Partial<HaltFlags> = {}): HaltFlags => ({
  namespace: 'kube-system',
  output: 'text',
  within: '20s',
  by: 'alice@ops',
  ...o,
});

function setup() {
  const clock = new FakeClock();
  const kube = fakeKubeAccess(clock);
  const printed: string[] = [];
  vi.spyOn(out, 'stdout').mockImplementation((t: string) => printed.push(t) > 0);
  const killed: string[] = [];
  const log = memoryLogger();
  const deps: HaltDeps = {
    kube: () => kube,
    clock,
    log,
    processes: {
      alive: (pid) => pid === 4242 || pid === 777,
      cmdline: (pid) => (pid === 4242 ? 'node bin/kube-runbook.js run x.yaml' : 'vim'),
    },
    kill: (pid, s) => killed.push(`${pid} ${s}`),
  };
  return { clock, kube, printed, killed, deps, log };
}

/** A journal of a run that has not ended, started by `pid` on this host. */
function journal(dir: string, runId: string, pid: number): void {
  mkdirSync(join(dir, 'runs'), { recursive: true });
  const run = { type: 'run', at: Date.UTC(2026, 0, 1), runId, runbookName: 'partition', pid, host: hostname() };
  writeFileSync(join(dir, 'runs', `${runId}.jsonl`), `${JSON.stringify(run)}\n`);
}

afterEach(() => vi.restoreAllMocks());
let dir = '';
tempDirEach('kr-halt-', (d) => (dir = d));

describe('kube-runbook halt, resume, status', () => {
  it('halt sets it and prints one line; status shows it; resume clears it, recording who and when', async () => {
    const { kube, printed, deps } = setup();
    expect(await haltCommand({ ...flags({ stateDir: dir }), reason: 'payments outage' }, deps)).toBe(0);
    expect(printed).toEqual([
      'halted by alice@ops since 2026-01-01T00:00:00.000000Z (Lease kube-system/kube-runbook-halt): payments outage: every run rolls back, none starts until kube-runbook resume',
    ]);
    printed.length = 0;
    expect(await statusCommand(flags({ stateDir: dir }), deps)).toBe(0);
    expect(printed[0]).toContain('HALTED: halted by alice@ops since 2026-01-01T00:00:00.000000Z');
    expect(printed[0]).toContain('run lock: free');
    printed.length = 0;
    expect(await resumeCommand(flags({ by: 'bob@ops' }), deps)).toBe(0);
    expect(printed).toEqual([
      'resumed by bob@ops at 2026-01-01T00:00:00.000000Z (Lease kube-system/kube-runbook-halt): runs may start again',
    ]);
    expect((await readHalt(kube)).halt).toBeUndefined();
  });

  it('a halt that cannot be written is tried again, then says so in one line, exit 1; --local still stops the runs here', async () => {
    const { clock, kube, printed, killed, deps, log } = setup();
    journal(dir, 'run-live', 4242);
    // a pid now another program's, and a run whose process is gone: neither is signalled
    journal(dir, 'run-reused', 777);
    journal(dir, 'run-killed', 999);
    kube.apiserver.mode = 'down';
    const halting = haltCommand({ ...flags({ stateDir: dir }), reason: 'apiserver down', local: true }, deps);
    await clock.advance(25_000);
    expect(await halting).toBe(1);
    expect(printed).toEqual([
      'NOT HALTED: the halt was not written (Lease kube-system/kube-runbook-halt): connect ECONNREFUSED; kube-runbook halt --local stops the runs of this machine; SIGTERM sent to run run-live (pid 4242) on this machine',
    ]);
    expect(killed).toEqual(['4242 SIGTERM']);
    expect(log.lines.filter((l) => l.msg.includes('halt not written yet')).length).toBeGreaterThan(1);
  });

  it("status -n of a lock namespace shows the cluster's halt beside its own, each with the command that clears it", async () => {
    const { printed, deps } = setup();
    expect(await haltCommand({ ...flags({ stateDir: dir, namespace: 'kr-locks' }), reason: 'team outage' }, deps)).toBe(0);
    expect(printed).toEqual([
      'halted by alice@ops since 2026-01-01T00:00:00.000000Z (Lease kr-locks/kube-runbook-halt): team outage: the runs locked in kr-locks roll back, none of them starts until kube-runbook resume -n kr-locks',
    ]);
    printed.length = 0;
    expect(await statusCommand(flags({ stateDir: dir, namespace: 'kr-locks' }), deps)).toBe(0);
    const lines = printed[0]!.split('\n');
    expect(lines.slice(0, 2)).toEqual([
      'halt: not set (Lease kube-system/kube-runbook-halt, `kube-runbook halt`: stops every run)',
      'HALTED: halted by alice@ops since 2026-01-01T00:00:00.000000Z (Lease kr-locks/kube-runbook-halt): team outage; kube-runbook resume -n kr-locks clears it',
    ]);
    printed.length = 0;
    expect(await statusCommand(flags({ stateDir: dir }), deps)).toBe(0);
    expect(printed[0]!.split('\n')[0]).toBe('halt: not set (Lease kube-system/kube-runbook-halt, `kube-runbook halt`: stops every run)');
  });

  it("plan's line names the halts that stop the run, and the one set", async () => {
    const { kube, deps, clock } = setup();
    expect(await haltLine(kube, 'kr-locks')).toEqual({
      line: 'halt: not set (Leases kube-system/kube-runbook-halt, kr-locks/kube-runbook-halt); `kube-runbook halt` stops this run, as does `kube-runbook halt -n kr-locks`',
      warn: false,
    });
    expect((await haltLine(kube, 'kube-system')).line).toBe(
      'halt: not set (Lease kube-system/kube-runbook-halt); `kube-runbook halt` stops this run',
    );
    await setHalt(kube, { by: 'alice@ops', reason: 'outage', clock: deps.clock });
    expect(await haltLine(kube, 'kr-locks')).toEqual({
      line: `HALTED: halted by alice@ops since ${new Date(clock.now()).toISOString().replace('Z', '000Z')} (Lease kube-system/kube-runbook-halt): outage; a run is refused until kube-runbook resume`,
      warn: true,
    });
  });
});
