import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { EXIT } from '../src/core/errors.js';
import { root, runCli } from './helpers/cli.js';

const cli = (...args: string[]) => runCli(args);

beforeAll(() => {
  if (!existsSync(join(root, 'dist/cli/main.js'))) throw new Error('dist/ is missing: run `npm run build` first');
});

/** The commands `--help` lists under each heading, in its order. */
function groups(help: string): Map<string, string[]> {
  const found = new Map<string, string[]>();
  let names: string[] | undefined;
  for (const line of help.split('\n')) {
    const heading = /^(\w[\w ]*Commands):$/.exec(line);
    if (heading) found.set(heading[1]!, (names = []));
    else if (!line.trim()) names = undefined;
    else if (names && /^ {2}\S/.test(line)) names.push(line.trim().split(/\s+/)[0]!);
  }
  return found;
}

describe('kube-runbook --help', () => {
  it('lists the commands in groups, each visible command in exactly one', { timeout: 60_000 }, async () => {
    const r = await cli('--help');
    expect(r.code).toBe(0);
    const g = groups(r.stdout);
    expect([...g.keys()]).toEqual([
      'Run Commands',
      'Author Commands',
      'Inspect Commands',
      'Operate Commands',
      'Develop Commands',
      'Other Commands',
    ]);
    expect(g.get('Run Commands')).toEqual(expect.arrayContaining(['run', 'plan', 'recover']));
    expect(g.get('Inspect Commands')).toEqual(expect.arrayContaining(['actions', 'probes', 'describe']));
    // every command the completion offers (the visible ones), once
    const visible = (await cli('__complete', '--', '')).stdout
      .split('\n')
      .filter((l) => l && !l.startsWith(':'))
      .map((l) => l.split('\t')[0]!);
    const listed = [...g.values()].flat();
    expect([...listed].sort()).toEqual([...visible].sort());
    expect(new Set(listed).size).toBe(listed.length);
    expect(r.stdout).not.toContain('__complete');
    expect(r.stdout).not.toContain('__exit-watch');
  });

  it('shows examples in a command’s help, and the exit codes in run’s', { timeout: 60_000 }, async () => {
    const a = await cli('actions', '--help');
    expect(a.stdout).toMatch(/\nExamples:\n {2}# .+\n {2}kube-runbook actions\n/);
    const r = await cli('run', '--help');
    expect(r.stdout).toContain('\nExamples:\n');
    const codes = [...r.stdout.split('\nExit codes:\n')[1]!.matchAll(/^ {2}(\d+) /gm)].map((m) => Number(m[1]));
    expect(codes).toEqual(Object.values(EXIT));
    expect(r.stdout.replace(/\n {7}/g, ' ')).toMatch(/^ {2}1 +failed, aborted or halted.*\[status: failed, aborted, halted\]$/m);
    for (const l of r.stdout.split('\n')) expect(l.length, l).toBeLessThanOrEqual(80);
  });
});

describe('a usage error', () => {
  it('is one line and where to read more, exit 2', async () => {
    const r = await cli('run', '--dryrun', 'runbook.yaml');
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe("kube-runbook: unknown option '--dryrun' (did you mean --dry-run?)\nRun 'kube-runbook run --help' for usage.\n");
  });

  it('names the command it is about, at any depth, and never prints the whole help', { timeout: 60_000 }, async () => {
    const cases = [
      [['rnu'], "Run 'kube-runbook --help' for usage."],
      [['actions', '-o', 'xml'], "Run 'kube-runbook actions --help' for usage."],
      [['describe'], "Run 'kube-runbook describe --help' for usage."],
      [['agent', 'manifests', '--nope'], "Run 'kube-runbook agent manifests --help' for usage."],
    ] as const;
    const ran = await Promise.all(cases.map(([args]) => cli(...args)));
    for (const [i, [args, hint]] of cases.entries()) {
      const r = ran[i]!;
      expect(r.code, args.join(' ')).toBe(2);
      const lines = r.stderr.trimEnd().split('\n');
      expect(lines.length, r.stderr).toBeLessThanOrEqual(2);
      expect(lines[0]).toMatch(/^kube-runbook: /);
      expect(lines.at(-1)).toBe(hint);
      expect(r.stderr).not.toContain('Usage:');
    }
  });
});
