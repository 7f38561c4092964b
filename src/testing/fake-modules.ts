import { z } from 'zod';
import { defineAction, type Action } from '../contract/action.js';
import { defineProbe, type Probe, type Reading } from '../contract/probe.js';

export interface ActionRecord {
  op: 'prepare' | 'apply' | 'revert';
  action: string;
  node?: string;
  at: number;
}

/** An action that records what the engine asked of it; `failApply`/`failRevert` make it fail on a node. */
export function recordingAction(
  id: string,
  log: ActionRecord[],
  o: { kind?: 'fault' | 'remediation'; targets?: 'nodes' | 'cluster'; failApply?: string; failRevert?: string; nodeSide?: boolean } = {},
): Action {
  return defineAction({
    meta: {
      id,
      summary: `test action ${id}`,
      description: 'records calls',
      access: [],
      params: z.object({ tag: z.string().optional() }),
      targets: o.targets ?? 'nodes',
      kind: o.kind ?? 'fault',
      undo: 'records the revert',
    },
    async prepare(ctx) {
      log.push({ op: 'prepare', action: id, node: ctx.node?.name, at: ctx.clock.now() });
      return { id, node: ctx.node?.name ?? null };
    },
    async apply(ctx, state) {
      log.push({ op: 'apply', action: id, node: ctx.node?.name, at: ctx.clock.now() });
      if (o.failApply && o.failApply === ctx.node?.name) throw new Error(`apply failed on ${ctx.node.name}`);
      return state;
    },
    async revert(ctx, state) {
      log.push({ op: 'revert', action: id, node: (state.node as string | null) ?? undefined, at: ctx.clock.now() });
      if (o.failRevert && o.failRevert === state.node) throw new Error(`revert failed on ${String(state.node)}`);
    },
    nodeSideRevert: (state) => (o.nodeSide === false ? undefined : `echo revert ${String(state.node)}`),
  });
}

/** A probe the test drives: every `push` is one reading to every running instance. */
export class ScriptedProbe {
  private listeners = new Set<(r: Reading) => void>();
  last?: Reading;
  starts = 0;
  readonly probe: Probe;

  /**
   * `o.perNode`: it judges nodes one by one, and a value `{notOk: [names]}` says which are not ok. `o.nodeFacts`: those
   * nodes are not Ready, as node facts it declares. `o.numbers`: it declares one number, `notOk`, how many they are.
   */
  constructor(id: string, initial?: Omit<Reading, 'at'>, o: { perNode?: boolean; nodeFacts?: boolean; numbers?: boolean } = {}) {
    const listeners = this.listeners;
    const state = { starts: () => this.starts++, last: () => this.last };
    this.probe = defineProbe({
      meta: {
        id,
        summary: `scripted probe ${id}`,
        description: 'test',
        params: z.object({}).passthrough(),
        access: [],
        ...(o.perNode ? { notOkNodes: (v: unknown) => (v as { notOk: string[] }).notOk } : {}),
        ...(o.nodeFacts
          ? {
              nodeFacts: {
                kinds: ['ready' as const],
                of: (v: unknown) => (v as { notOk: string[] }).notOk.map((node) => ({ kind: 'ready' as const, node, status: 'False' })),
              },
            }
          : {}),
        ...(o.numbers
          ? { numbers: { what: 'nodes not ok', of: (v: unknown) => ({ notOk: (v as { notOk: string[] }).notOk.length }) } }
          : {}),
      },
      async *start(ctx) {
        state.starts();
        const queue: Reading[] = [];
        let wake: (() => void) | undefined;
        const listener = (r: Reading) => {
          queue.push(r);
          wake?.();
        };
        listeners.add(listener);
        const last = state.last();
        if (last) queue.push(last);
        else if (initial) queue.push({ ...initial, at: ctx.clock.now() });
        try {
          while (!ctx.signal.aborted) {
            if (!queue.length)
              await new Promise<void>((resolve) => {
                wake = resolve;
                ctx.signal.addEventListener('abort', () => resolve(), { once: true });
              });
            wake = undefined;
            while (queue.length) yield queue.shift()!;
          }
        } finally {
          listeners.delete(listener);
        }
      },
    });
  }

  push(status: Reading['status'], detail: string = status, at = 0, value: unknown = null): void {
    this.last = { status, at, value, detail };
    for (const l of this.listeners) l(this.last);
  }

  get running(): number {
    return this.listeners.size;
  }
}
