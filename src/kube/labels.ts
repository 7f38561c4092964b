import { KrError, quote } from '../core/errors.js';

/**
 * Kubernetes label selectors: `k=v`, `k==v`, `k!=v`, `k`, `!k`, `k in (a,b)`, `k notin (a,b)`; a comma means and.
 * Parsed once into a predicate, so watching thousands of objects stays cheap.
 */
export type LabelMatcher = (labels: Record<string, string>) => boolean;

const KEY = /^[A-Za-z0-9][A-Za-z0-9_.\-/]*$/;

export function parseLabelSelector(selector: string): LabelMatcher {
  const terms: LabelMatcher[] = [];
  for (const raw of selector.match(/[^,(]+(?:\([^)]*\))?/g) ?? []) {
    const p = raw.trim();
    if (!p) continue;
    let m = /^(\S+)\s+(in|notin)\s+\(([^)]*)\)$/.exec(p);
    if (m) {
      const [, key = '', op, list = ''] = m;
      const values = new Set(list.split(',').map((v) => v.trim()));
      checkKey(key, selector);
      terms.push(op === 'in' ? (l) => key in l && values.has(l[key]!) : (l) => !(key in l && values.has(l[key]!)));
      continue;
    }
    m = /^([^=!\s]+)\s*(==|=|!=)\s*([^=!\s]*)$/.exec(p);
    if (m) {
      const [, key = '', op, value = ''] = m;
      checkKey(key, selector);
      terms.push(op === '!=' ? (l) => l[key] !== value : (l) => l[key] === value);
      continue;
    }
    const negated = p.startsWith('!');
    const key = negated ? p.slice(1).trim() : p;
    checkKey(key, selector);
    terms.push(negated ? (l) => !(key in l) : (l) => key in l);
  }
  return (labels) => terms.every((t) => t(labels));
}

function checkKey(key: string, selector: string): void {
  if (!KEY.test(key))
    throw new KrError('LABEL_SELECTOR_INVALID', `bad label selector ${quote(selector)}: ${quote(key)} is not a label key`, { exit: 2 });
}

/** Whether two label maps hold the same labels. */
export function sameLabels(a: Record<string, string>, b: Record<string, string>): boolean {
  const ka = Object.keys(a);
  return ka.length === Object.keys(b).length && ka.every((k) => a[k] === b[k]);
}
