import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { EXIT, KrError, quote } from '../core/errors.js';

/** A report of a run this server started: its directory's name (the run's handle) and its report.json. */
export interface SavedReport {
  name: string;
  file: string;
  mtimeMs: number;
}

/** The reports under DIR (one directory per run, each with a report.json once the run ended), newest first. */
function savedReports(dir: string): SavedReport[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  return names
    .flatMap((name) => {
      const file = join(dir, name, 'report.json');
      try {
        return [{ name, file, mtimeMs: statSync(file).mtimeMs }];
      } catch {
        return [];
      }
    })
    .sort((a, b) => b.mtimeMs - a.mtimeMs || (a.name < b.name ? 1 : -1));
}

/** The report named NAME, or the newest when none is named; REPORT_NOT_FOUND when there is none such. */
export function pickReport(dir: string, name: string | undefined): SavedReport {
  const all = savedReports(dir);
  const found = name === undefined ? all[0] : all.find((r) => r.name === name);
  if (found) return found;
  throw new KrError(
    'REPORT_NOT_FOUND',
    name === undefined
      ? `no run started by this server has a report yet (under ${dir})`
      : `no report is called ${quote(name)} (reports: ${all.map((r) => r.name).join(', ') || 'none'})`,
    { exit: EXIT.invalid },
  );
}
