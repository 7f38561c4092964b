import { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { KrError } from '../core/errors.js';
import { npmOnly } from './npm-only.js';

describe('a command the single executable leaves out', () => {
  const program = () => {
    const p = new Command('kube-runbook').exitOverride();
    npmOnly('lab').register(p, () => undefined);
    return p;
  };

  it('says in one line that it needs the npm package, exit 2, whatever its arguments and options', async () => {
    for (const args of [['lab', 'up', '--nodes', '3', '--zones', '2'], ['lab', '--help'], ['lab']]) {
      const e = await program()
        .parseAsync(['node', 'kube-runbook', ...args])
        .then(
          () => undefined,
          (err: unknown) => err,
        );
      expect(e, args.join(' ')).toBeInstanceOf(KrError);
      expect((e as KrError).exit).toBe(2);
      expect((e as KrError).message).toBe('`lab` needs the npm package (npm install -g kube-runbook): the single executable leaves it out');
      expect((e as KrError).details).toEqual([]);
    }
  });

  it('is listed in the help as needing the npm package', () => {
    expect(program().helpInformation()).toMatch(/lab \[args\.\.\.\]\s+needs the npm package/);
  });
});
