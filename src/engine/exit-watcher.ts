import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import type { ExitObject } from '../contract/context.js';
import type { Clock } from '../core/clock.js';
import { messageOf } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import { retrying } from '../core/retry.js';
import { ApiStatusError } from '../kube/source.js';
import { kubeTransient } from '../kube/transient.js';
import type { KubeAccess, KubeSource } from '../kube/types.js';

/**
 * The exit watcher's side of ExitWatch (exit-watch.ts), run by the hidden `__exit-watch` command in a process of its
 * own. It reads lines of JSON on its stdin, the executor's end of a pipe: first `{"kube": KubeSource, "deadlineMs": N}`,
 * then `{"add": KEY, "objects": [...]}` and `{"forget": KEY}`. When the stdin ends (the executor exited, however: a
 * SIGKILL closes the pipe as surely as an exit), it deletes the objects of every key not forgotten, each only while it
 * still has the uid it was registered with (a precondition: an object of the same name made later by another run is
 * not touched), retrying what may pass for `deadlineMs`. Nothing to delete: it reaches for no cluster at all.
 */
export interface ExitWatcherDeps {
  clock: Clock;
  log: Logger;
  connect(source: KubeSource): KubeAccess;
}

export interface ExitWatchStart {
  kube: KubeSource;
  deadlineMs: number;
}

type Line = { add: string; objects: ExitObject[] } | { forget: string };

/** Reads the executor's messages to their end, then deletes what is left; resolves with what could not be deleted. */
export async function runExitWatcher(input: Readable, deps: ExitWatcherDeps): Promise<string[]> {
  let start: ExitWatchStart | undefined;
  const held = new Map<string, ExitObject[]>();
  for await (const text of createInterface({ input, crlfDelay: Infinity })) {
    if (!text.trim()) continue;
    let line: unknown;
    try {
      line = JSON.parse(text);
    } catch {
      deps.log.warn(`exit watch: ignored a line that is not JSON: ${text.slice(0, 80)}`);
      continue;
    }
    if (!start) {
      start = line as ExitWatchStart;
      continue;
    }
    const l = line as Line;
    if ('add' in l) held.set(l.add, [...(held.get(l.add) ?? []), ...l.objects]);
    else if ('forget' in l) held.delete(l.forget);
  }
  const objects = [...held.values()].flat();
  if (!objects.length || !start) return [];
  deps.log.info(`exit watch: the executor ended holding ${objects.length} object(s); deleting them`);
  const kube = deps.connect(start.kube);
  const deadline = deps.clock.now() + start.deadlineMs;
  const left: string[] = [];
  for (const o of objects) {
    try {
      const gone = await retrying(() => deleteIfSame(kube, o), {
        clock: deps.clock,
        deadline,
        classify: (e) => kubeTransient(e, { safeToRepeat: true }),
        onFailure: (f) =>
          f.retryInMs !== undefined && deps.log.warn(`exit watch: ${o.what}: ${f.error}; trying again in ${f.retryInMs} ms`),
      });
      deps.log.info(`exit watch: ${o.what} ${gone}`);
    } catch (e) {
      left.push(`${o.what}: ${messageOf(e)}`);
      deps.log.error(`exit watch: ${o.what} not deleted: ${messageOf(e)}`);
    }
  }
  kube.close?.();
  return left;
}

/** DELETE with a uid precondition: 404 (gone already) and 409 (another object of the name now) leave it be. */
async function deleteIfSame(kube: KubeAccess, o: ExitObject): Promise<string> {
  try {
    await kube.json!(o.path, {
      method: 'DELETE',
      body: { apiVersion: 'v1', kind: 'DeleteOptions', preconditions: { uid: o.uid }, propagationPolicy: 'Background' },
      timeoutMs: 10_000,
    });
    return 'deleted';
  } catch (e) {
    if (e instanceof ApiStatusError && e.status === 404) return 'was gone already';
    if (e instanceof ApiStatusError && e.status === 409) return 'is another object now (uid differs): left alone';
    throw e;
  }
}
