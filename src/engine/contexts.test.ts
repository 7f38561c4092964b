import { describe, expect, it } from 'vitest';
import { allowsEveryContext, contextAllowed } from './contexts.js';

describe('spec.safety.allowContexts', () => {
  const server = 'https://10.96.0.1:443';
  it('matches context names by glob', () => {
    expect(contextAllowed('staging-eu', server, ['staging-*'])).toBe(true);
    expect(contextAllowed('production', server, ['staging-*', 'lab'])).toBe(false);
  });

  it('an entry with @ matches the context and the apiserver URL together', () => {
    expect(contextAllowed('in-cluster', server, ['in-cluster@https://10.96.0.1:443'])).toBe(true);
    expect(contextAllowed('in-cluster', 'https://10.96.0.2:443', ['in-cluster@https://10.96.0.1:443'])).toBe(false);
    expect(contextAllowed('in-cluster', 'https://10.96.0.1:443', ['lab@https://10.96.0.1:443', 'lab-*'])).toBe(false);
    expect(contextAllowed('staging-eu', 'https://api.eu.staging.example:6443', ['staging-*@https://api.*.staging.example:6443'])).toBe(
      true,
    );
  });

  it('a pattern of many stars against a long name answers at once (linear time)', () => {
    // with JavaScript's backtracking RegExp this takes longer than the test's timeout
    const stars = `${'*'.repeat(25)}b`;
    expect(contextAllowed('a'.repeat(2000), server, [stars])).toBe(false);
    expect(contextAllowed(`${'a'.repeat(2000)}b`, server, [stars])).toBe(true);
    expect(contextAllowed('lab', server, ['(lab)|x', 'l[a]b'])).toBe(false);
  });

  it('dots in a server are literal, not any character', () => {
    expect(contextAllowed('in-cluster', 'https://10x96.0.1:443', ['in-cluster@https://10.96.0.1:443'])).toBe(false);
  });

  it('a pattern that names no cluster allows every context, whatever its spelling', () => {
    const contexts = [
      ['prod-eu', 'https://api.prod.example:6443'],
      ['admin@prod', 'https://10.0.0.1:6443'],
      ['in-cluster', 'https://10.96.0.1:443'],
    ] as const;
    // these admit every context there is, as "*" does
    for (const p of ['*', '**', '?*', '*?', '*@*', '*@?*', '*@https://*']) {
      expect(allowsEveryContext(p), p).toBe(true);
      for (const [context, server] of contexts) expect(contextAllowed(context, server, [p]), `${p} ${context}`).toBe(true);
    }
    // these name no cluster either: a separator, a scheme or a port is no name
    for (const p of ['*-*', '*.*', '*/*', '*@http*://*:6443', '*@*:6443']) expect(allowsEveryContext(p), p).toBe(true);
    const named = [
      'staging-*',
      'lab',
      '*prod*',
      'in-cluster@*',
      'in-cluster@https://10.96.0.1:443',
      '*@https://10.96.0.1:443',
      '*@*.staging.example:*',
    ];
    for (const p of named) expect(allowsEveryContext(p), p).toBe(false);
  });
});
