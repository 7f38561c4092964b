import { type Command, Option } from 'commander';
import { EXIT } from '../core/errors.js';
import { columns } from './columns.js';
import { out } from './output.js';
import type { Done } from './types.js';

/** What a listing command shows: one row a module, and the cells of its line of text. */
export interface Listing<R> {
  name: string;
  description: string;
  rows: () => Promise<R[]>;
  line: (row: R) => string[];
}

/** A command that lists modules (`actions`, `probes`): a line each in columns, or `-o json` the rows as a JSON array. */
export function registerListing<R>(program: Command, done: Done, listing: Listing<R>): void {
  program
    .command(listing.name)
    .description(listing.description)
    .addOption(new Option('-o, --output <format>', 'output format').choices(['text', 'json']).default('text'))
    .action(async (o: { output: string }) => {
      const rows = await listing.rows();
      out.stdout(o.output === 'json' ? JSON.stringify(rows, null, 2) : columns(rows.map(listing.line)));
      done(EXIT.ok);
    });
}
