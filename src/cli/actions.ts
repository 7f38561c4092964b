import { defaultRegistry as registry } from '../engine/registry.js';
import { registerListing } from './listing.js';
import type { CommandHelp, Register } from './types.js';

/** `actions [-o json]`: every action, one line each (id, kind, summary), sorted by id. */
export const register: Register = (program, done) =>
  registerListing(program, done, {
    name: 'actions',
    description: 'list the actions a runbook can apply, one a line (details: `describe ACTION`)',
    async rows() {
      const rows = [];
      for (const id of registry.ids('action')) {
        const m = (await registry.action(id)).meta;
        rows.push({ id, kind: m.kind, targets: m.targets, summary: m.summary });
      }
      return rows;
    },
    line: (r) => [r.id, r.kind, r.summary],
  });

/** Where `--help` lists it, and its examples. */
export const help: CommandHelp = {
  group: 'Inspect',
  examples: [
    ['actions', 'every action, one a line'],
    ['actions -o json', 'the same as JSON (or -o yaml)'],
  ],
};
