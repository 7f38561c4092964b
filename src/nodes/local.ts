import type { InventoryNode } from '../inventory/schema.js';
import { runProcess, type TransportDeps } from './exec-process.js';
import type { ExecOptions, ExecResult, Transport } from './types.js';
import { wireScript } from './wire.js';

/** Runs scripts on this machine: `sh -s`, the script on stdin, in a process group of its own. */
export function localTransport(deps: TransportDeps = {}): Transport {
  return {
    kind: 'local',
    async exec(node: InventoryNode, script: string, options: ExecOptions = {}): Promise<ExecResult> {
      return runProcess(
        {
          argv: ['sh', '-s'],
          stdin: wireScript(script, options.input),
          node: node.name,
          transport: 'local',
          timeoutMs: options.timeoutMs,
          signal: options.signal,
        },
        deps,
      );
    },
  };
}
