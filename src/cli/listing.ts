import type { Command } from 'commander';
import { EXIT } from '../core/errors.js';
import { columns } from './columns.js';
import { formatData, isData, outputOption } from './formats.js';
import { out } from './output.js';
import type { Done } from './types.js';

/** What a listing command shows: one row a module, and the cells of its line of text. */
export interface Listing<R> {
  name: string;
  description: string;
  rows: () => Promise<R[]>;
  line: (row: R) => string[];
}

/** A command that lists modules (`actions`, `probes`): a line each in columns, or (`-o json|yaml`) the rows as an array. */
export function registerListing<R>(program: Command, done: Done, listing: Listing<R>): void {
  program
    .command(listing.name)
    .description(listing.description)
    .addOption(outputOption())
    .action(async (o: { output: string }) => {
      const rows = await listing.rows();
      out.stdout(isData(o.output) ? formatData(o.output, rows) : columns(rows.map(listing.line)));
      done(EXIT.ok);
    });
}
