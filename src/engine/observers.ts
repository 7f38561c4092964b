import type { Ctx } from '../contract/context.js';
import { withDeclarations } from './declarations.js';
import type { ObserverProbe } from './access.js';
import type { RunEventSink } from './events.js';
import { consumeProbe } from './probe-stream.js';

/**
 * Starts the observers (probes watched for the report only, never guards: pod deletions, say), each reading emitted
 * as an observation; `stop` ends them and waits for them.
 */
export function observe(ctx: Ctx, observers: readonly ObserverProbe[], emit: RunEventSink): { stop(): Promise<void> } {
  const stopping = new AbortController();
  const running = observers.map((ob) =>
    consumeProbe(ctx, ob.probe, ob.params, stopping.signal, (reading) => {
      emit({ type: 'observation', at: reading.at, name: ob.name, reading, ...withDeclarations(ob.probe) });
    }),
  );
  return {
    async stop() {
      stopping.abort();
      await Promise.all(running);
    },
  };
}
