/**
 * Text for XML and HTML: the five special characters escaped, and the control characters XML 1.0 has no place
 * for dropped (runbook names and probe details are user text and may hold anything).
 */
export const escapeMarkup = (s: string): string =>
  [...s]
    .filter((c) => c >= ' ' || c === '\t' || c === '\n' || c === '\r')
    .join('')
    .replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/** Markup `markup` made: escaped already, so another `markup` puts it in as it is. Nothing else makes one. */
export class Markup {
  readonly #text: string;
  private constructor(text: string) {
    this.#text = text;
  }
  toString(): string {
    return this.#text;
  }
  /** Only for `markup` and `joinMarkup`, below. */
  static of(text: string, key: symbol): Markup {
    if (key !== OWN) throw new TypeError('Markup is made by markup`…` only');
    return new Markup(text);
  }
}

const OWN = Symbol('markup');

/** What `markup` takes between its literal parts: text and numbers (escaped), markup it made (as it is), lists of these. */
export type MarkupValue = Markup | string | number | undefined | null | readonly MarkupValue[];

const piece = (v: MarkupValue): string =>
  v instanceof Markup ? v.toString() : Array.isArray(v) ? v.map(piece).join('') : v == null ? '' : escapeMarkup(String(v));

/**
 * The report page's one way to write markup: the template's literal parts are the markup, and every value put in
 * it is escaped (text, attribute values alike: the page quotes every attribute with `"`), unless it is markup this
 * tag made. Values from a report.json (which anyone may have written) cannot open an element or an attribute.
 */
export function markup(literals: TemplateStringsArray, ...values: MarkupValue[]): Markup {
  let out = literals[0]!;
  values.forEach((v, i) => {
    out += piece(v) + literals[i + 1]!;
  });
  return Markup.of(out, OWN);
}

/** Pieces of markup with `separator` (literal markup, such as a newline) between them. */
export const joinMarkup = (parts: readonly MarkupValue[], separator: '' | '\n' = ''): Markup =>
  Markup.of(parts.map(piece).join(separator), OWN);

/** A class name from run data (a status): only letters, digits, `-` and `_`, so it cannot add another class. */
export const classToken = (s: string): string => s.replace(/[^A-Za-z0-9_-]/g, '_');
