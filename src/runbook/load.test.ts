import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { defaultRegistry } from '../engine/registry.js';
import { krFailure } from '../testing/kr-failure.js';
import { loadRunbook, parseRunbookText } from './load.js';

const fixtures = fileURLToPath(new URL('../../test/fixtures/', import.meta.url));
const invalid = (name: string) => join(fixtures, 'invalid', name);
const valid = (name: string) => join(fixtures, 'valid', name);

/** Problems as the CLI prints them, without the file prefix. */
async function problems(name: string): Promise<string[]> {
  const file = invalid(name);
  const e = await krFailure(loadRunbook(file, defaultRegistry));
  expect(e.code).toBe('RUNBOOK_INVALID');
  expect(e.exit).toBe(2);
  expect(e.message).toBe(`${file}: ${e.details.length} ${e.details.length === 1 ? 'problem' : 'problems'}`);
  for (const d of e.details) expect(d.startsWith(`${file}:`)).toBe(true);
  return e.details.map((d) => d.slice(file.length + 1));
}

const DURATION = 'expected a duration such as 500ms, 10s, 5m or 1h';

describe('loadRunbook reports every problem as LINE:COL: PATH: message (got VALUE)', () => {
  it('a typo in a key, with a suggestion, and the key it leaves missing', async () => {
    expect(await problems('typo-key.yaml')).toEqual([
      '5:1: spec: missing required key "steps"',
      '6:3: spec.stepz: unknown key "stepz" (did you mean "steps"?)',
    ]);
  });

  it('values of the wrong type, at the value', async () => {
    expect(await problems('wrong-type.yaml')).toEqual([
      '5:9: metadata.tags: expected a list (got "game-day")',
      '8:20: spec.safety.allowContexts: expected a list (got "lab")',
      '11:13: spec.steps[0].name: expected a string (got a list: ["a","b"])',
    ]);
  });

  it('unknown action and probe ids, with the known ones', async () => {
    const actions = defaultRegistry.ids('action').join(', ');
    expect(await problems('unknown-action.yaml')).toEqual([
      `7:14: spec.guards[0].probe: unknown probe "comand" (did you mean "command"? known: ${defaultRegistry.ids('probe').join(', ')})`,
      `10:15: spec.steps[0].action: unknown action "run-comand" (did you mean "run-command"? known: ${actions})`,
      `12:15: spec.steps[1].action: unknown action "make-coffee" (known: ${actions})`,
    ]);
  });

  it('bad durations, in the runbook and inside with:', async () => {
    expect(await problems('bad-duration.yaml')).toEqual([
      `7:18: spec.safety.maxDuration: ${DURATION} (got "-5m")`,
      `10:15: spec.steps[0].within: ${DURATION} (got "5 minutes")`,
      `11:13: spec.steps[1].wait: ${DURATION} (got 10)`,
      `13:54: spec.steps[2].with.timeout: ${DURATION} (got "1d")`,
    ]);
  });

  it('a remediation or protective step that would not outlast the faults, where the wrong value is set', async () => {
    // remediationTtl left at its default (1h) below faultTtl: said at faultTtl
    expect(await problems('remediation-ttl.yaml')).toEqual([
      `5:44: spec.safety.faultTtl: remediationTtl (1h, the default) must be longer than faultTtl (2h): a remediation's dead-man would undo it before the faults' dead-men revert them; set spec.safety.remediationTtl above faultTtl (got "2h")`,
    ]);
    // a protective step's dead-man waits remediationTtl too: said at remediationTtl
    expect(await problems('remediation-ttl-given.yaml')).toEqual([
      `8:21: spec.safety.remediationTtl: remediationTtl (5m) must be longer than faultTtl (10m): a remediation's dead-man would undo it before the faults' dead-men revert them; set spec.safety.remediationTtl above faultTtl (got "5m")`,
    ]);
  });

  it('a YAML syntax error, at the opening quote', async () => {
    expect(await problems('yaml-syntax.yaml')).toEqual(['7:16: YAML syntax error: this quoted text has no closing quote']);
  });

  it('bad indentation', async () => {
    const [only, ...rest] = await problems('bad-indent.yaml');
    expect(rest).toEqual([]);
    expect(only).toMatch(/^8:4: YAML syntax error: .*\(check the indentation of this line\)$/);
  });

  it('a duplicate key, with where the first one is', async () => {
    expect(await problems('duplicate-key.yaml')).toEqual(['9:7: spec.steps[0].name: duplicate key "name" (first at 7:7)']);
  });

  it('tab indentation', async () => {
    expect(await problems('tabs.yaml')).toEqual(['7:1: tab character used for indentation (YAML allows only spaces)']);
  });

  it.each([['empty.yaml'], ['comments-only.yaml']])('an empty file: %s', async (name) => {
    expect(await problems(name)).toEqual(['1:1: the file is empty; expected a Runbook']);
  });

  it.each([['binary.yaml'], ['latin1.yaml']])('binary content: %s', async (name) => {
    expect(await problems(name)).toEqual(['1:1: not a text file']);
  });

  it('a list instead of a mapping', async () => {
    expect(await problems('list.yaml')).toEqual(['1:1: expected a mapping with apiVersion, kind, metadata, spec (got a list)']);
  });

  it('text that is not a YAML mapping', async () => {
    expect(await problems('prose.yaml')).toEqual([
      '1:1: expected a mapping with apiVersion, kind, metadata, spec (got "Stop the apiserver, wait five minutes, then bring it back")',
    ]);
  });

  it('several documents in one file', async () => {
    expect(await problems('multi-doc.yaml')).toEqual(['6:1: a second YAML document starts here; a file holds exactly one']);
  });

  it("with: checked against the module's own schema, inside the with: mapping", async () => {
    expect(await problems('bad-with.yaml')).toEqual([
      '8:7: spec.steps[0].with: missing required key "apply"',
      '9:9: spec.steps[0].with.aply: unknown key "aply" (did you mean "apply"?)',
      `11:18: spec.steps[0].with.timeout: ${DURATION} (got 10)`,
      '14:9: spec.steps[1].expect.with: missing required key "run"',
      `18:36: spec.rollback.waitFor.with.timeout: ${DURATION} (got "soon")`,
    ]);
  });

  it('steps: the variant is picked by its key, not reported as an invalid union', async () => {
    expect(await problems('steps-union.yaml')).toEqual([
      '7:7: spec.steps[0]: expected one of the keys action, expect, wait, confirm, revert, parallel; did you mean "action"? (got {"name":"no kind of step","acton":"run-command"})',
      '9:7: spec.steps[1]: expected only one of the keys action, expect, wait, confirm, revert, parallel, but found wait and confirm (got {"name":"two kinds of step","wait":"5s","confirm":"go on?"})',
      '13:11: spec.steps[2].parallel[0]: expected one of the keys action, expect, wait (got {"confirm":"not in parallel"})',
      '14:7: spec.steps[3]: expected a mapping (got "just a string")',
    ]);
  });

  it('node selectors', async () => {
    expect(await problems('bad-selector.yaml')).toEqual([
      '9:16: spec.steps[0].with.nodes: expected one of all, workers, control-plane; did you mean "workers"? (got "worker")',
      '14:23: spec.steps[1].with.nodes.role: expected one of control-plane, worker, etcd, load-balancer; did you mean "worker"? (got "workr")',
      '19:16: spec.steps[2].with.nodes: give count or percent, not both (got {"count":2,"percent":50})',
    ]);
  });

  it('a revert step names an earlier action step', async () => {
    expect(await problems('revert-unknown.yaml')).toEqual([
      '7:15: spec.steps[0].revert: no earlier action step has this name (earlier action steps: none) (got "too early")',
      '11:15: spec.steps[2].revert: no earlier action step has this name (earlier action steps: "stop the apiserver"; did you mean "stop the apiserver"?) (got "stop the apiservr")',
    ]);
  });

  it("objectives, the run's and a step's: a duration for within, a known probe, a name of their own, a step that is there", async () => {
    const got = await problems('bad-objectives.yaml');
    expect(got).toEqual([
      '11:17: spec.steps[0].objectives[0].name: another objective has this name (got "ready again")',
      expect.stringMatching(
        /^12:18: spec\.steps\[0\]\.objectives\[0\]\.probe: unknown probe "node-readyy" \(did you mean "node-ready"\? known: /,
      ),
      `17:15: spec.objectives[0].within: ${DURATION} (got "soon")`,
      '18:13: spec.objectives[1].name: another objective has this name (got "leases fresh")',
      expect.stringMatching(/^19:14: spec\.objectives\[1\]\.probe: unknown probe "node-leasez" \(did you mean "node-leases"\? known: /),
      '23:20: spec.objectives[2].from.step: no step has this name (named steps: "cut node-1"; did you mean "cut node-1"?) (got "cut node-2")',
    ]);
  });

  it('a guard that remediates needs a remediation', async () => {
    expect(await problems('remediate-without-remediation.yaml')).toEqual([
      '9:20: spec.guards[0].onViolation: onViolation is "remediate" but spec.remediation is empty (got "remediate")',
    ]);
  });

  it('all problems at once, sorted by position', async () => {
    expect(await problems('many-problems.yaml')).toEqual([
      '1:13: apiVersion: expected "kube-runbook/v1" (got "kube-runbook/v2")',
      '4:9: metadata.name: expected a lowercase name such as apiserver-outage (got "Many Problems")',
      '5:3: metadata.owner: unknown key "owner" (allowed: name, description, tags)',
      '10:20: spec.guards[0].onViolation: expected one of abort, remediate, warn; did you mean "abort"? (got "abrt")',
      `13:13: spec.steps[0].wait: ${DURATION} (got "5 seconds")`,
      '15:7: spec.steps[1].with: missing required key "revert"',
      `17:13: spec.rollback.within: ${DURATION} (got 5)`,
    ]);
  });

  it('an Inventory given as a runbook', async () => {
    const e = await krFailure(
      parseRunbookText('apiVersion: kube-runbook/v1\nkind: Inventory\nmetadata: {name: x}\nspec: {}\n', 'inv.yaml', defaultRegistry),
    );
    expect(e.details).toEqual(['inv.yaml:1:1: this is an Inventory; expected a Runbook']);
  });

  it('quotes long values shortened', async () => {
    const long = 'x'.repeat(500);
    const e = await krFailure(
      parseRunbookText(
        `apiVersion: kube-runbook/v1\nkind: Runbook\nmetadata: {name: a}\nspec:\n  steps: [{wait: ${long}}]\n`,
        'long.yaml',
        defaultRegistry,
      ),
    );
    expect(e.details).toHaveLength(1);
    expect(e.details[0]!.length).toBeLessThan(200);
    expect(e.details[0]).toMatch(/^long\.yaml:5:18: spec\.steps\[0\]\.wait: expected a duration .*\(got "x+…\)$/);
  });
});

describe('files that cannot be read', () => {
  const dirs: string[] = [];
  afterAll(async () => Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true }))));

  it('a missing file', async () => {
    const e = await krFailure(loadRunbook(invalid('no-such-file.yaml'), defaultRegistry));
    expect(e.code).toBe('FILE_UNREADABLE');
    expect(e.exit).toBe(2);
    expect(e.message).toBe(`cannot read ${invalid('no-such-file.yaml')}: no such file`);
  });

  it('a directory', async () => {
    const e = await krFailure(loadRunbook(fixtures, defaultRegistry));
    expect(e.code).toBe('FILE_UNREADABLE');
    expect(e.message).toBe(`cannot read ${fixtures}: it is a directory`);
  });

  it('a file too large to be a runbook', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'kr-load-'));
    dirs.push(dir);
    const file = join(dir, 'huge.yaml');
    await writeFile(file, `# ${'x'.repeat(5 * 1024 * 1024)}\n`);
    const e = await krFailure(loadRunbook(file, defaultRegistry));
    expect(e.code).toBe('FILE_UNREADABLE');
    expect(e.message).toMatch(/too large/);
  });
});

describe('valid runbooks', () => {
  it('with: replaced by the module output, defaults applied; nodes a parsed selector', async () => {
    const { runbook, file } = await loadRunbook(valid('full.yaml'), defaultRegistry);
    expect(file).toBe(valid('full.yaml'));
    const [steady, fault, seen, revert, wait, confirm, confirmLong, parallel] = runbook.spec.steps;
    expect(steady).toEqual({
      name: 'steady state',
      expect: { probe: 'command', with: { run: 'true', interval: 5000, timeout: 10_000 }, status: 'ok' },
      within: 60_000,
    });
    expect(fault).toEqual({
      name: 'the fault',
      action: 'run-command',
      with: {
        nodes: { role: 'worker', zone: 'zone-a', percent: 50 },
        apply: 'touch /tmp/kr-full',
        revert: 'rm -f /tmp/kr-full',
        check: 'command -v touch',
        timeout: 10_000,
      },
      timeout: 120_000,
      revertLast: false,
    });
    expect(seen).toMatchObject({ expect: { status: 'violated' }, within: 30_000 });
    expect(revert).toEqual({ name: 'the fault is undone early', revert: 'the fault' });
    expect(wait).toEqual({ wait: 1500 });
    expect(confirm).toEqual({ confirm: 'Go on?', timeout: 300_000, onTimeout: 'rollback' });
    expect(confirmLong).toEqual({ confirm: { message: 'Really?', timeout: 60_000, onTimeout: 'continue' } });
    expect(parallel).toMatchObject({
      parallel: [
        { action: 'run-command', with: { nodes: { names: ['node-1'] }, timeout: 60_000 } },
        { expect: { with: { interval: 5000 } } },
        { wait: 1000 },
      ],
    });
    expect(runbook.spec.safety).toEqual({
      allowContexts: ['lab', 'staging-*'],
      maxDuration: 900_000,
      faultTtl: 90_000,
      remediationTtl: 3_600_000,
      lockNamespace: 'kube-system',
      maxUnavailable: { controlPlane: 1, worker: '50%' },
    });
    expect(runbook.spec.guards[0]).toEqual({
      name: 'marker absent',
      probe: 'command',
      with: { run: '! test -e /tmp/kr-full-trouble', interval: 1000, timeout: 10_000 },
      onViolation: 'remediate',
      onUnknown: 'hold',
      unknownFor: 20_000,
    });
    expect(runbook.spec.guards[1]).toMatchObject({ onViolation: 'warn', onUnknown: 'ignore', unknownFor: 60_000 });
    expect(runbook.spec.remediation[0]!.with).toEqual({
      nodes: 'workers',
      apply: 'touch /tmp/kr-protect',
      revert: 'rm -f /tmp/kr-protect',
      timeout: 60_000,
    });
    expect(runbook.spec.rollback).toEqual({
      waitFor: { probe: 'command', with: { run: '! test -e /tmp/kr-full', interval: 5000, timeout: 10_000 } },
      within: 120_000,
    });
  });

  it("node-targeted actions without nodes get the module's default selector", async () => {
    const { runbook } = await parseRunbookText(
      'apiVersion: kube-runbook/v1\nkind: Runbook\nmetadata: {name: a}\nspec:\n  steps: [{action: run-command, with: {apply: x, revert: y}}]\n',
      'a.yaml',
      defaultRegistry,
    );
    expect(runbook.spec.steps[0]).toMatchObject({ with: { nodes: 'all', apply: 'x', revert: 'y' } });
  });

  it('minimal: defaults of the runbook itself', async () => {
    const { runbook } = await loadRunbook(valid('minimal.yaml'), defaultRegistry);
    expect(runbook.spec).toEqual({
      safety: {
        allowContexts: [],
        maxDuration: 1_800_000,
        faultTtl: 600_000,
        remediationTtl: 3_600_000,
        lockNamespace: 'kube-system',
        maxUnavailable: { controlPlane: 1, worker: '50%' },
      },
      guards: [],
      steps: [{ wait: 500 }],
      remediation: [],
      objectives: [],
      rollback: { within: 300_000 },
    });
  });

  it('JSON is YAML too; tabs inside a block scalar are text, not indentation', async () => {
    expect((await loadRunbook(valid('json-style.yaml'), defaultRegistry)).runbook.spec.steps[0]).toMatchObject({
      with: { nodes: { count: 1 } },
    });
    const script = (await loadRunbook(valid('tabs-in-script.yaml'), defaultRegistry)).runbook.spec.steps[0];
    expect(script).toMatchObject({ with: { apply: 'if true; then\n\techo tab-indented shell is fine inside a block scalar\nfi\n' } });
  });

  it('where() gives FILE:LINE:COL of a path, for later messages', async () => {
    const file = valid('full.yaml');
    const { where } = await loadRunbook(file, defaultRegistry);
    expect(where(['spec', 'steps', 1])).toBe(`${file}:25:7`);
    expect(where(['spec', 'steps', 1, 'with', 'timeout'])).toBe(`${file}:32:18`);
    expect(where(['spec', 'guards', 0, 'with', 'run'])).toBe(`${file}:13:19`);
    // a path not in the file: where its mapping is
    expect(where(['spec', 'remediation', 0, 'timeout'])).toBe(`${file}:51:7`);
  });
});

describe('YAML syntax errors', () => {
  it('reports the first few and counts the rest, which mostly follow from them', async () => {
    const broken = Array.from({ length: 9 }, (_, i) => `key${i}: "a\n  - b: c\n`).join('');
    const e = await krFailure(parseRunbookText(`apiVersion: kube-runbook/v1\n${broken}`, 'b.yaml', defaultRegistry));
    expect(e.details.length).toBeLessThanOrEqual(6);
    expect(e.details.at(-1)).toMatch(/^b\.yaml:\d+:\d+: \d+ more YAML syntax errors from here on, likely caused by the ones above$/);
  });
});
