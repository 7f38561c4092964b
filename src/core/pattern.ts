import { RE2JS } from 're2js';
import { KrError, messageOf, quote } from './errors.js';

/**
 * Regular expressions from runbooks (the http probe's `bodyMatches`, CEL's `matches()`) run on re2js, a pure
 * JavaScript port of RE2: matching takes time linear in the input whatever the pattern, where JavaScript's
 * backtracking RegExp takes exponential time on patterns like `(a+)+$` and would stall the event loop (and with it
 * every keepalive). RE2 syntax is also what CEL specifies for `matches()`. The pure port keeps the single
 * executable free of native addons (the `re2` package binds Google's C++ library).
 */
export interface Pattern {
  readonly source: string;
  /** True when the pattern matches somewhere in `text` (a search, as RegExp's `test`). */
  test(text: string): boolean;
}

/** Why `source` is not an RE2 pattern (backreferences, lookahead and the like are not), or undefined. */
export function patternProblem(source: string): string | undefined {
  try {
    RE2JS.compile(source);
    return undefined;
  } catch (e) {
    return `not an RE2 regular expression: ${messageOf(e)}`;
  }
}

/** Compiles an RE2 pattern; a bad one throws PATTERN_INVALID (exit 2) naming it. */
export function compilePattern(source: string): Pattern {
  let re: RE2JS;
  try {
    re = RE2JS.compile(source);
  } catch (e) {
    throw new KrError('PATTERN_INVALID', `${quote(source)} is not an RE2 regular expression: ${messageOf(e)}`, { exit: 2 });
  }
  return { source, test: (text) => re.test(text) };
}
