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

/** What `ip netns exec` says when it could not enter the namespace; it then exits 255 before running anything. */
const ENTRY_FAILED =
  /^(?:Cannot open network namespace|setting the network namespace .* failed|unshare failed|"mount --make-rslave \/" failed|mount of \/sys failed)/m;

/**
 * Whether a result is the netns transport's own failure, and one that can pass: `ip netns exec` failing to enter
 * the namespace (exit 255 with its words) while the namespace's file is there (a namespace being set up or torn
 * down). Exit codes of the script itself are the script's, and permanent. The one place that decides it for netns.
 */
export function netnsTransient(r: ExecResult): string | undefined {
  return r.code === 255 && ENTRY_FAILED.test(r.stderr) ? 'namespace entry failure' : undefined;
}

/**
 * Runs scripts inside a network namespace of this machine (the lab's nodes): `ip netns exec <ns> sh -s`,
 * as an argv, the script on stdin. Needs root. A namespace that does not exist throws `NODE_UNREACHABLE`
 * (permanent: the node is not on this machine); failing to enter one that does throws it as transient.
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
      const r = await runProcess(
        {
          argv: ['ip', 'netns', 'exec', ns, 'sh', '-s'],
          stdin,
          node: node.name,
          transport: 'netns',
          timeoutMs: options.timeoutMs,
          signal: options.signal,
        },
        deps,
      );
      const transient = netnsTransient(r);
      if (!transient) return r;
      const said = r.stderr.trim().split('\n')[0]?.slice(0, 300);
      throw new KrError('NODE_UNREACHABLE', `node ${quote(node.name)}: cannot enter network namespace ${quote(ns)}: ${said}`, {
        transient,
      });
    },
  };
}
