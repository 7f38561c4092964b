import { EXIT, KrError } from '../core/errors.js';
import type { CommandHelp, Register } from './types.js';

/**
 * What stands for `lab` and `demo` in the single executable (scripts/sea.mjs), which leaves them out: they run files
 * beside dist/ (the kubelet simulator, the CLI as a child, the demo's runbook) that the executable does not have, and
 * they are most of its bundle. The command stays, so that it says what to do in one line (exit 2).
 */
export function npmOnly(name: string): { register: Register; help: CommandHelp } {
  return {
    help: { group: 'Develop', examples: [] },
    register: (program) => {
      program
        .command(name)
        .description('needs the npm package (not in the single executable)')
        .argument('[args...]')
        .helpOption(false)
        .allowUnknownOption()
        .action(() => {
          throw new KrError(
            'NPM_PACKAGE_ONLY',
            `\`${name}\` needs the npm package (npm install -g kube-runbook): the single executable leaves it out`,
            { exit: EXIT.invalid },
          );
        });
    },
  };
}
