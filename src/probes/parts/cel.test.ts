import { describe, expect, it } from 'vitest';
import { CEL_COST_LIMIT, celProblem, compileCondition } from './cel.js';

const CATASTROPHIC = '(a+)+$';
const aaab = 'a'.repeat(40) + 'b';

describe('CEL conditions', () => {
  it('runs matches() on RE2: a catastrophic pattern on a long aaa…b answers at once', () => {
    // JavaScript's RegExp takes about a second at 26 a's and doubles with each one more: 40 would take hours.
    const c = compileCondition(`object.metadata.name.matches('${CATASTROPHIC}')`);
    expect(c({ metadata: { name: aaab } })).toEqual({ ok: false });
    expect(c({ metadata: { name: 'aaaa' } })).toEqual({ ok: true });
    const fromObject = compileCondition('object.metadata.name.matches(object.spec.pattern)');
    expect(fromObject({ metadata: { name: aaab }, spec: { pattern: CATASTROPHIC } })).toEqual({ ok: false });
    expect(fromObject({ metadata: { name: 'web-7' }, spec: { pattern: '^web-[0-9]+$' } })).toEqual({ ok: true });
  });

  it('validate checks a literal pattern where it stands, and a pattern from the object fails only that object', () => {
    expect(celProblem(`object.metadata.name.matches('${CATASTROPHIC}')`)).toBeUndefined();
    const expr = "object.metadata.name.matches('(?=web)x')";
    expect(celProblem(expr)).toEqual({
      message: expect.stringMatching(/^CEL: matches\(\): not an RE2 regular expression: /) as string,
      offset: expr.indexOf("'(?="),
    });
    expect(celProblem("'web-1'.matches(1) && object.x")?.message).toBe("CEL: found no matching overload for 'string.matches(int)'");
    const c = compileCondition('object.metadata.name.matches(object.spec.pattern)');
    expect(c({ metadata: { name: 'x' }, spec: { pattern: '(a' } })).toEqual({
      ok: false,
      error: expect.stringContaining('not an RE2 regular expression') as string,
    });
  });

  it('refuses at validate a condition whose cost is over the limit even on the smallest object', () => {
    const hundred = `[${Array.from({ length: 100 }, (_, i) => i).join(',')}]`;
    const nested = `${hundred}.all(a, ${hundred}.all(b, ${hundred}.all(c, a + b + c >= 0)))`;
    expect(celProblem(nested)).toEqual({
      message: expect.stringMatching(/^CEL: the condition would cost at least [\d,]+, more than the limit of 1,000,000/) as string,
      offset: 0,
    });
    expect(celProblem(`${hundred}.all(a, ${hundred}.all(b, a + b >= 0))`)).toBeUndefined();
  });

  it('stops an evaluation at the cost limit with a clear error, and the next object starts afresh', () => {
    const items = Array.from({ length: 2000 }, (_, i) => i);
    const c = compileCondition('object.items.all(a, object.items.all(b, object.items.all(c, a + b + c >= 0)))');
    expect(c({ items })).toEqual({ ok: false, error: 'the condition costs more than the limit of 1,000,000' });
    expect(c({ items: [1, 2, 3] })).toEqual({ ok: true });
  });

  it('an error that || would swallow still ends at the limit', () => {
    const items = Array.from({ length: 3000 }, (_, i) => i);
    const c = compileCondition('object.items.exists(a, object.items.exists(b, a + b < 0)) || true');
    expect(c({ items })).toEqual({ ok: false, error: 'the condition costs more than the limit of 1,000,000' });
    expect(c({ items: [1] })).toEqual({ ok: true });
  });

  it('charges what a string grows to: doubling a string runs out before it fills the memory', () => {
    const binds = (n: number): string => (n === 0 ? 'object.s' : `cel.bind(x${n}, ${binds(n - 1)}, x${n} + x${n})`);
    const c = compileCondition(`${binds(40)}.size() > 0`);
    expect(c({ s: 'abcdefghij' })).toEqual({ ok: false, error: 'the condition costs more than the limit of 1,000,000' });
  });

  it('a condition well under the limit evaluates as before', () => {
    expect(CEL_COST_LIMIT).toBe(1_000_000);
    const c = compileCondition("object.status.conditions.exists(c, c.type == 'Ready' && c.status == 'True')");
    expect(c({ status: { conditions: [{ type: 'Ready', status: 'True' }] } })).toEqual({ ok: true });
    expect(c({ status: { conditions: [{ type: 'Ready', status: 'False' }] } })).toEqual({ ok: false });
  });
});
