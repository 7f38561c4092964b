import type { InventoryNode } from '../inventory/schema.js';

export interface ExecOptions {
  /** Kills the script after this long (locally and, over ssh, on the node with `timeout`). */
  timeoutMs?: number;
  /** Given to the script on its stdin. */
  input?: string;
  signal?: AbortSignal;
  /**
   * Through a node agent: once the agent has taken the script, how long to wait for its answer before the node
   * counts as cut off (`NODE_UNREACHABLE`), when less than the timeout. For scripts that cut the agent off themselves.
   */
  silenceMs?: number;
}

export interface ExecResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a POSIX sh script on a node. The script travels on stdin; nothing of it is spliced into a command line. */
export interface Transport {
  readonly kind: 'ssh' | 'netns' | 'local' | 'agent' | 'fake';
  exec(node: InventoryNode, script: string, options?: ExecOptions): Promise<ExecResult>;
}

/** What modules use: nodes by name, through whatever transport the inventory gives each. */
export interface NodeAccess {
  get(name: string): InventoryNode;
  list(): InventoryNode[];
  exec(node: string, script: string, options?: ExecOptions): Promise<ExecResult>;
  /** Runs a script on the machine the executor runs on. */
  execHere(script: string, options?: ExecOptions): Promise<ExecResult>;
}
