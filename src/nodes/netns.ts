import { access } from 'node:fs/promises';
import type { InventoryNode } from '../inventory/schema.js';
import { EXIT, KrError, quote } from '../core/errors.js';
import { runProcess, type TransportDeps } from './exec-process.js';
import type { ExecOptions, ExecResult, Transport } from './types.js';
import { wireScript } from './wire.js';

/** Names `ip netns` accepts as a file under /run/netns, and nothing an argv parser could take for an option. */
const NETNS_NAME = /^[A-Za-z0-9_][A-Za-z0-9_.-]*$/;

/** The network namespace a node's scripts run in: `node.netns`, else the node's name. */
export function netnsOf(node: InventoryNode): string {
  const ns = node.netns ?? node.name;
  if (!NETNS_NAME.test(ns) || ns.length > 200)
    throw new KrError(
      'BAD_NETNS_NAME',
      `node ${quote(node.name)}: a network namespace name is letters, digits, '_', '.' and '-', not starting with '.' or '-' (got ${quote(ns)})`,
      { exit: EXIT.invalid },
    );
  return ns;
}

/**
 * Runs scripts inside a network namespace of this machine (the lab's nodes): `ip netns exec <ns> sh -s`,
 * as an argv without a shell, the script on stdin. Needs root.
 */
export function netnsTransport(deps: TransportDeps & { netnsDir?: string } = {}): Transport {
  const dir = deps.netnsDir ?? '/run/netns';
  return {
    kind: 'netns',
    async exec(node: InventoryNode, script: string, options: ExecOptions = {}): Promise<ExecResult> {
      const ns = netnsOf(node);
      const stdin = wireScript(script, options.input);
      try {
        await access(`${dir}/${ns}`);
      } catch {
        throw new KrError('NODE_UNREACHABLE', `node ${quote(node.name)}: there is no network namespace ${quote(ns)} on this machine`);
      }
      return runProcess(
        { argv: ['ip', 'netns', 'exec', ns, 'sh', '-s'], stdin, node: node.name, transport: 'netns', timeoutMs: options.timeoutMs, signal: options.signal },
        deps,
      );
    },
  };
}
