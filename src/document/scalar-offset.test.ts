import { describe, expect, it } from 'vitest';
import { parseYamlSource } from './yaml-source.js';

const expected = { what: 'a test', keys: ['a'] };

/** Where the character `ch` (its `nth` occurrence in the value) is reported, and where it really is in the text. */
function check(text: string, ch: string, nth = 0) {
  const src = parseYamlSource(text, 'f.yaml', expected).source!;
  const value = (src.value as { a: string }).a;
  let offset = -1;
  for (let i = 0; i <= nth; i++) offset = value.indexOf(ch, offset + 1);
  return src.locateIn(['a'], offset);
}

describe('locateIn: a character of a scalar value, in the YAML text', () => {
  it('plain, single- and double-quoted scalars, escapes included', () => {
    expect(check('a: x > 1 && y\n', 'y')).toEqual({ line: 1, col: 13 });
    expect(check("a: 'it''s # y'\n", 'y')).toEqual({ line: 1, col: 13 });
    expect(check('a: "\\"q\\" \\u0041 y"\n', 'y')).toEqual({ line: 1, col: 18 });
  });

  it('literal and folded blocks, multi-line plain scalars', () => {
    expect(check('a: |\n  one\n    two y\n', 'y')).toEqual({ line: 3, col: 9 });
    expect(check('a: >-\n  one\n  two\n\n  three y\n', 'y')).toEqual({ line: 5, col: 9 });
    expect(check('a: one\n  two y\n', 'y')).toEqual({ line: 2, col: 7 });
  });

  it('an offset at the end points just after the last character', () => {
    const src = parseYamlSource('a: "x >= "\n', 'f.yaml', expected).source!;
    expect(src.locateIn(['a'], 5)).toEqual({ line: 1, col: 9 });
  });
});
