import type { InventoryNode } from '../inventory/schema.js';
import { sshError } from '../nodes/ssh.js';
import type { ExecOptions, ExecResult, NodeAccess } from '../nodes/types.js';

export interface ExecCall {
  node: string;
  script: string;
  options: ExecOptions;
}

export type FakeHandler = (call: ExecCall) => ExecResult | Promise<ExecResult>;

/** NodeAccess that records every script and answers with `handler` (exit 0 by default). `here` is the executor's machine. */
export class FakeNodes implements NodeAccess {
  readonly calls: ExecCall[] = [];
  handler: FakeHandler;

  constructor(
    private readonly nodes: InventoryNode[],
    handler?: FakeHandler,
  ) {
    this.handler = handler ?? (() => ({ code: 0, stdout: '', stderr: '' }));
  }

  get(name: string): InventoryNode {
    const n = this.nodes.find((x) => x.name === name);
    if (!n) throw new Error(`no node ${name} in the inventory`);
    return n;
  }

  list(): InventoryNode[] {
    return [...this.nodes];
  }

  async exec(node: string, script: string, options: ExecOptions = {}): Promise<ExecResult> {
    this.get(node);
    const call = { node, script, options };
    this.calls.push(call);
    return this.handler(call);
  }

  async execHere(script: string, options: ExecOptions = {}): Promise<ExecResult> {
    const call = { node: 'here', script, options };
    this.calls.push(call);
    return this.handler(call);
  }

  /** Scripts run on `node`, in order. */
  scriptsOn(node: string): string[] {
    return this.calls.filter((c) => c.node === node).map((c) => c.script);
  }
}

/** What ssh says when sshd resets the connection (it restarts, or the network drops it). */
const SSH_RESET = 'kex_exchange_identification: read: Connection reset by peer';

/**
 * A test transport's behaviour: the first `n` calls on each node that `match` fail as the ssh transport fails when
 * the connection is reset (its own error and verdict, src/nodes/ssh.ts); every other call goes to `then`.
 */
export function resetFirst(n: number, match: (call: ExecCall) => boolean, then: FakeHandler): FakeHandler {
  const failed = new Map<string, number>();
  return (call) => {
    const count = failed.get(call.node) ?? 0;
    if (match(call) && count < n) {
      failed.set(call.node, count + 1);
      throw sshError(call.node, `10.0.0.1 (${call.node})`, SSH_RESET);
    }
    return then(call);
  };
}

/**
 * A test transport's behaviour: the scripts that `fails` picks exit `code` (1) printing `stderr` on stderr; every
 * other script exits 0 printing `okStdout`.
 */
export function failingOn(fails: (script: string) => boolean, stderr: string, o: { code?: number; okStdout?: string } = {}): FakeHandler {
  return ({ script }) => (fails(script) ? { code: o.code ?? 1, stdout: '', stderr } : { code: 0, stdout: o.okStdout ?? '', stderr: '' });
}
