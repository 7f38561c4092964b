import type { InventoryNode } from '../inventory/schema.js';
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
