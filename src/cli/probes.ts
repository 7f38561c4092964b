import { defaultRegistry as registry } from '../engine/registry.js';
import { registerListing } from './listing.js';
import type { CommandHelp, Register } from './types.js';

/** `probes [-o json]`: every probe, one line each (id, summary), sorted by id. */
export const register: Register = (program, done) =>
  registerListing(program, done, {
    name: 'probes',
    description: 'list the probes guards, expect steps and rollback.waitFor can use, one a line (details: `describe PROBE`)',
    async rows() {
      const rows = [];
      for (const id of registry.ids('probe')) rows.push({ id, summary: (await registry.probe(id)).meta.summary });
      return rows;
    },
    line: (r) => [r.id, r.summary],
  });

/** Where `--help` lists it, and its examples. */
export const help: CommandHelp = {
  group: 'Inspect',
  examples: [
    ['probes', 'every probe, one a line'],
    ['probes -o yaml', 'the same as YAML (or -o json)'],
  ],
};
