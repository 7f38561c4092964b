import { parse as parseJsonc, printParseErrorCode, type ParseError } from 'jsonc-parser';
import { EXIT, KrError } from '../core/errors.js';
import { invalidFileError, type Problem } from '../document/problems.js';
import { parseYamlSource } from '../document/yaml-source.js';
import { zodProblems } from '../document/zod-problems.js';
import type { RunReport } from './collect.js';
import { Report, REPORT_VERSION } from './schema.js';

/** A report.json of a long run over thousands of nodes stays well under this; a wrong file does not fill memory. */
export const MAX_REPORT_BYTES = 256 * 1024 * 1024;

const EXPECTED = { what: "a kube-runbook report (a run's report.json)", keys: ['reportVersion', 'runId', 'runbook', 'status'] };

/**
 * Reads a saved report back, as `kube-runbook report` renders it. `file` names it in messages (a path, or where the
 * text came from). A report older than `reportVersion` (none written) reads as version 1; a newer one is refused in
 * one line; anything else wrong is a FILE:LINE:COL problem per field, exit 2.
 */
export function parseReport(text: string, file: string): RunReport {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    // JSON.parse says where only for some mistakes: jsonc-parser (strict: no comments, no trailing commas) says it for all
    throw invalidFileError('REPORT_INVALID', file, syntaxProblems(text));
  }
  if (typeof value === 'object' && value !== null && !Array.isArray(value)) {
    const v = (value as { reportVersion?: unknown }).reportVersion;
    if (typeof v === 'number' && v > REPORT_VERSION)
      throw new KrError(
        'REPORT_TOO_NEW',
        `${file}: reportVersion ${v} is newer than this kube-runbook reads (${REPORT_VERSION}); render it with the kube-runbook that wrote it, or a newer one`,
        {
          exit: EXIT.invalid,
        },
      );
    if (v === undefined) value = { reportVersion: REPORT_VERSION, ...value };
  }
  const parsed = Report.safeParse(value);
  if (parsed.success) return parsed.data;
  // the fields' places, from the YAML reader the runbooks use (JSON is YAML)
  const { source, problems } = parseYamlSource(text, file, EXPECTED);
  throw invalidFileError('REPORT_INVALID', file, source ? zodProblems(Report, source.value, parsed.error.issues, [], source) : problems);
}

/** Where the JSON text breaks, and how. */
function syntaxProblems(text: string): Problem[] {
  const errors: ParseError[] = [];
  parseJsonc(text, errors, { disallowComments: true, allowTrailingComma: false, allowEmptyContent: false });
  const lineStarts = [0, ...[...text.matchAll(/\n/g)].map((m) => m.index + 1)];
  const place = (offset: number) => {
    const line = lineStarts.findLastIndex((s) => s <= offset);
    return { line: line + 1, col: offset - lineStarts[line]! + 1 };
  };
  if (!errors.length) return [{ line: 1, col: 1, path: '', message: `not ${EXPECTED.what}` }];
  // one mistake may raise several errors at one place: the first says it
  const first = errors.filter((e, i) => errors.findIndex((o) => o.offset === e.offset) === i);
  return first.map((e) => ({ ...place(e.offset), path: '', message: `not JSON here: ${words(printParseErrorCode(e.error))}` }));
}

/** `PropertyNameExpected` as `property name expected`. */
const words = (code: string) => code.replace(/([a-z])([A-Z])/g, '$1 $2').toLowerCase();
