import { basename, extname, relative } from 'node:path';
import { EXIT, KrError, quote } from '../core/errors.js';
import { didYouMean } from '../document/did-you-mean.js';

/**
 * The runbooks the server was started with, by name: a file's name without `.yaml`/`.yml`, or its path (relative to
 * the working directory) where two files share a name. Tools take one of these names, never a path or runbook text,
 * so a model can neither write a runbook of its own nor point the server at another file.
 */
export class RunbookCatalog {
  private readonly byName = new Map<string, string>();

  constructor(files: readonly string[], cwd: string) {
    const counts = new Map<string, number>();
    const short = (f: string) => basename(f, extname(f));
    for (const f of files) counts.set(short(f), (counts.get(short(f)) ?? 0) + 1);
    for (const f of files) this.byName.set(counts.get(short(f)) === 1 ? short(f) : relative(cwd, f), f);
  }

  names(): string[] {
    return [...this.byName.keys()].sort();
  }

  /** The file of a runbook named NAME, or RUNBOOK_NOT_OFFERED naming the ones there are. */
  file(name: string): string {
    const f = this.byName.get(name);
    if (f !== undefined) return f;
    const hint = didYouMean(name, this.names());
    throw new KrError(
      'RUNBOOK_NOT_OFFERED',
      `no runbook is called ${quote(name)} here${hint ? `: ${hint}` : ''}; this server offers only the runbooks it was started with: ${
        this.names().join(', ') || 'none (start it with --runbooks DIR|FILE...)'
      }`,
      { exit: EXIT.invalid },
    );
  }
}
