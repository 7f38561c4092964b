import { Option } from 'commander';
import { EXIT } from '../core/errors.js';
import { defaultRegistry as registry } from '../engine/registry.js';
import { columns } from './columns.js';
import { out } from './output.js';
import type { Register } from './types.js';

/** `probes [-o json]`: every probe, one line each (id, summary), sorted by id. */
export const register: Register = (program, done) => {
  program
    .command('probes')
    .description('list the probes guards, expect steps and rollback.waitFor can use, one a line (details: `describe PROBE`)')
    .addOption(new Option('-o, --output <format>', 'output format').choices(['text', 'json']).default('text'))
    .action(async (o: { output: string }) => {
      const rows = [];
      for (const id of registry.ids('probe')) rows.push({ id, summary: (await registry.probe(id)).meta.summary });
      out.stdout(o.output === 'json' ? JSON.stringify(rows, null, 2) : columns(rows.map((r) => [r.id, r.summary])));
      done(EXIT.ok);
    });
};
