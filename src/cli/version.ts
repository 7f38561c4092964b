import { isSea } from 'node:sea';
import { Option } from 'commander';
import { stringify } from 'yaml';
import { EXIT } from '../core/errors.js';
import { buildInfo } from '../core/version.js';
import { out } from './output.js';
import type { CommandHelp, Register } from './types.js';

/** `version [-o text|json|yaml]`: the version, the commit it was built from, the Node and platform it runs on. */
export const register: Register = (program, done) => {
  program
    .command('version')
    .description('Print the version, the git commit it was built from (if known), the Node.js and platform it runs on.')
    .addOption(new Option('-o, --output <format>', 'output format').choices(['text', 'json', 'yaml']).default('text'))
    .action((o: { output: 'text' | 'json' | 'yaml' }) => {
      const info = buildInfo(isSea);
      if (o.output === 'json') out.stdout(JSON.stringify(info, null, 2));
      else if (o.output === 'yaml') out.stdout(stringify(info));
      else
        out.stdout(
          [
            `kube-runbook ${info.version}`,
            `commit:            ${info.commit ?? 'unknown (not recorded by this build)'}`,
            `node:              ${info.node}`,
            `platform:          ${info.platform}`,
            `single executable: ${info.singleExecutable ? 'yes' : 'no (the npm package)'}`,
          ].join('\n'),
        );
      done(EXIT.ok);
    });
};

export const help: CommandHelp = {
  group: 'Inspect',
  examples: [
    ['version', 'the version, the commit it was built from, the Node.js and platform it runs on'],
    ['version -o json', 'the same as JSON, for bug reports and scripts'],
  ],
};
