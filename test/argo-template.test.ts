import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { afterAll, describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('..', import.meta.url));
interface Template {
  name: string;
  container?: { command?: string[]; args?: string[] };
  script?: { command: string[]; source: string };
  steps?: {
    name: string;
    template: string;
    continueOn?: { failed?: boolean };
    arguments?: { parameters: { name: string; value: string }[] };
  }[][];
  podSpecPatch?: string;
}
const wf = parse(readFileSync(`${root}deploy/argo/workflowtemplate.yaml`, 'utf8')) as { spec: { templates: Template[] } };
const template = (name: string) => wf.spec.templates.find((t) => t.name === name)!;
const dir = mkdtempSync(join(tmpdir(), 'kr-argo-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The verdict step's script as Argo runs it: its inputs substituted, run by `sh`. */
function verdict(code: string): { status: number | null; meaning: string } {
  const out = join(dir, `meaning-${code || 'none'}`);
  const source = template('verdict')
    .script!.source.replaceAll('{{inputs.parameters.cluster}}', 'staging-eu')
    .replaceAll('{{inputs.parameters.exit-code}}', code)
    .replaceAll('/tmp/meaning', out);
  const r = spawnSync('sh', ['-c', source], { encoding: 'utf8' });
  return { status: r.status, meaning: readFileSync(out, 'utf8').trim() };
}

describe('deploy/argo/workflowtemplate.yaml', () => {
  it('runs the executor as the container itself (PID 1, no shell between), so SIGTERM reaches it', () => {
    const run = template('run');
    expect(run.container?.command).toEqual(['kube-runbook']);
    expect(run.container?.args?.[0]).toBe('run');
    expect(run.container?.args).toContain('--journal-configmap');
    expect(run.container?.args?.filter((a) => ['sh', '-c', 'exec'].includes(a))).toEqual([]);
    expect(run.podSpecPatch).toContain('terminationGracePeriodSeconds');
  });

  it("judges the run's exit code in a verdict step that gets it, whatever it was", () => {
    const steps = template('cluster').steps!.flat();
    expect(steps.find((s) => s.name === 'run')).toMatchObject({ template: 'run', continueOn: { failed: true } });
    expect(steps.find((s) => s.name === 'verdict')?.arguments?.parameters).toContainEqual({
      name: 'exit-code',
      value: '{{steps.run.exitCode}}',
    });
  });

  it('every exit but 0 fails the step with the same code and says what it means', () => {
    expect(verdict('0')).toEqual({ status: 0, meaning: 'staging-eu: exit 0: passed' });
    const said: Record<string, RegExp> = {
      '1': /exit 1: failed: .*everything was reverted/,
      '2': /exit 2: invalid: /,
      '3': /exit 3: refused at preflight .*nothing was touched/,
      '4': /exit 4: rollback incomplete: a fault may remain applied/,
      '130': /exit 130: interrupted/,
    };
    for (const [code, meaning] of Object.entries(said)) {
      const v = verdict(code);
      expect(v.status, code).toBe(Number(code));
      expect(v.meaning).toMatch(meaning);
    }
    // killed (SIGKILL: 137) or no code at all: failed too, never passed
    expect(verdict('137')).toMatchObject({ status: 137, meaning: expect.stringContaining('left no exit code of its own') });
    expect(verdict('')).toMatchObject({ status: 1, meaning: expect.stringContaining('left no exit code of its own') });
  });
});
