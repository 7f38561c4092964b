import { EXIT, KrError, quote } from '../core/errors.js';
import { compilePattern } from '../core/pattern.js';
import type { LoadedRunbook } from '../runbook/load.js';

/**
 * Globs as in `staging-*`: `*` any run of characters, `?` one. A pattern with `@` (`in-cluster@https://10.96.0.1:443`,
 * `staging-*@https://api.staging.example:6443`) matches `CONTEXT@SERVER`: the cluster, not only a context's name.
 */
export function contextAllowed(context: string, server: string, patterns: string[]): boolean {
  // on RE2: a pattern of many stars against a long name takes linear time, not the backtracking's polynomial
  const glob = (p: string) =>
    compilePattern(
      `^${p
        .replace(/[.+^${}()|[\]\\]/g, '\\$&')
        .replace(/\*/g, '.*')
        .replace(/\?/g, '.')}$`,
    );
  return patterns.some((p) => glob(p).test(p.includes('@') ? `${context}@${server}` : context));
}

/**
 * Whether an allowContexts pattern names no cluster, and so allows every context whatever its spelling (`*`, `?*`,
 * `**`, `*-*`, `*@?*`, `*@https://*:6443`): none of its literal words (runs of letters and digits; `*` and `?` are
 * not literal) can be part of a context's name or of its server's host. After the first `@`, where the pattern
 * matches the server too, the scheme's `http`/`https` and a port (digits after a `:`) do not count: every server has
 * them. `staging-*`, `*prod*`, `in-cluster@*` and `*@https://10.96.0.1:443` each name something.
 */
export function allowsEveryContext(pattern: string): boolean {
  const at = pattern.indexOf('@');
  const words = (s: string) => [...s.matchAll(/[\p{L}\p{N}]+/gu)];
  if (words(at < 0 ? pattern : pattern.slice(0, at)).length) return false;
  if (at < 0) return true;
  const server = pattern.slice(at + 1);
  const isPort = (m: RegExpExecArray) => /^\p{N}+$/u.test(m[0]) && server[m.index - 1] === ':';
  return words(server).every((m) => /^https?$/i.test(m[0]) || isPort(m));
}

/**
 * A runbook that allows every context runs only against a context named on the command line (`--context`, or
 * `--in-cluster`), never against whatever the kubeconfig's current context happens to be.
 */
export function requireNamedContext(loaded: LoadedRunbook, named: boolean): void {
  if (named) return;
  const i = loaded.runbook.spec.safety.allowContexts.findIndex((p) => allowsEveryContext(p));
  if (i < 0) return;
  const pattern = loaded.runbook.spec.safety.allowContexts[i]!;
  throw new KrError(
    'CONTEXT_NOT_NAMED',
    `${loaded.where(['spec', 'safety', 'allowContexts', i])}: spec.safety.allowContexts[${i}]: ${quote(pattern)} allows every context: ` +
      `name the one to run against with --context NAME (the kubeconfig's current context is not taken for it)`,
    { exit: EXIT.invalid },
  );
}
