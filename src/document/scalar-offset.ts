import type { Scalar } from 'yaml';

const WS = /\s/;

/**
 * Where character `offset` of a string scalar's value sits in the YAML text. YAML changes only whitespace
 * between the source and the value (indentation stripped, lines folded) apart from quoting escapes (`''` in
 * single quotes, `\…` in double quotes), so the value's non-whitespace characters appear in the source in the
 * same order: the offset is found by counting them on both sides. `yaml` keeps no such map itself.
 */
export function scalarSourceOffset(text: string, node: Scalar, offset: number): number {
  const [start, end] = node.range ?? [0, 0];
  const value = typeof node.value === 'string' ? node.value : String(node.value);
  // the target: the k-th non-whitespace character of the value (or just after the last one before `offset`)
  let k = 0;
  for (let i = 0; i < Math.min(offset, value.length); i++) if (!WS.test(value[i]!)) k++;
  const onChar = offset < value.length && !WS.test(value[offset]!);
  let i = start;
  if (node.type === 'BLOCK_LITERAL' || node.type === 'BLOCK_FOLDED') {
    const nl = text.indexOf('\n', start);
    i = nl < 0 ? end : nl + 1;
  } else if (node.type === 'QUOTE_SINGLE' || node.type === 'QUOTE_DOUBLE') i = start + 1;
  let seen = 0;
  let afterLast = i;
  while (i < end) {
    const c = text[i]!;
    let width = 1;
    let ws = WS.test(c);
    if (node.type === 'QUOTE_SINGLE' && c === "'") {
      if (text[i + 1] !== "'") break; // the closing quote
      width = 2;
    } else if (node.type === 'QUOTE_DOUBLE' && c === '"') break;
    else if (node.type === 'QUOTE_DOUBLE' && c === '\\') {
      const e = text[i + 1] ?? '';
      width = e === 'x' ? 4 : e === 'u' ? 6 : e === 'U' ? 10 : 2;
      ws = e === '\n' || e === '\r';
    }
    if (!ws) {
      if (onChar && seen === k) return i;
      seen++;
      afterLast = i + width;
      if (!onChar && seen === k) return afterLast;
    }
    i += width;
  }
  return afterLast;
}
