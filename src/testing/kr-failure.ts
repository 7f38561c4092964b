import { KrError } from '../core/errors.js';

/** The KrError `p` rejects with; fails the test when it resolves or rejects with anything else. */
export async function krFailure(p: Promise<unknown>): Promise<KrError> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  if (!(e instanceof KrError)) throw new Error(`expected a KrError, got ${e === undefined ? 'success' : String(e)}`);
  return e;
}

/** The KrError `f` throws; fails the test when it returns or throws anything else. */
export function krThrown(f: () => unknown): KrError {
  try {
    f();
  } catch (e) {
    if (e instanceof KrError) return e;
    throw e;
  }
  throw new Error('did not throw');
}
