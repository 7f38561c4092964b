import { Option } from 'commander';
import { EXIT } from '../core/errors.js';
import { defaultRegistry as registry } from '../engine/registry.js';
import { columns } from './columns.js';
import { out } from './output.js';
import type { Register } from './types.js';

/** `actions [-o json]`: every action, one line each (id, kind, summary), sorted by id. */
export const register: Register = (program, done) => {
  program
    .command('actions')
    .description('list the actions a runbook can apply, one a line (details: `describe ACTION`)')
    .addOption(new Option('-o, --output <format>', 'output format').choices(['text', 'json']).default('text'))
    .action(async (o: { output: string }) => {
      const rows = [];
      for (const id of registry.ids('action')) {
        const m = (await registry.action(id)).meta;
        rows.push({ id, kind: m.kind, targets: m.targets, summary: m.summary });
      }
      out.stdout(o.output === 'json' ? JSON.stringify(rows, null, 2) : columns(rows.map((r) => [r.id, r.kind, r.summary])));
      done(EXIT.ok);
    });
};
