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
 * Runs scripts inside a network namespace of this machine (the lab's nodes): `ip netns exec <ns> sh -s`, or, for a
 * node with a mount namespace of its own (`node.mountns`, a kubeadm lab's node, whose /etc/kubernetes and
 * /var/lib/kubelet are its own), `nsenter --net=… --mount=… sh -s`; as an argv, the script on stdin. Needs root. A
 * namespace that does not exist throws `NODE_UNREACHABLE` (permanent: the node is not on this machine); failing to
 * enter one that does throws it as transient.
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
      const spec = { node: node.name, transport: 'netns', timeoutMs: options.timeoutMs, signal: options.signal } as const;
      const cannotEnter = (what: string, r: ExecResult) =>
        new KrError(
          'NODE_UNREACHABLE',
          `node ${quote(node.name)}: cannot enter ${what}: ${r.stderr.trim().split('\n')[0]?.slice(0, 300)}`,
          {
            transient: 'namespace entry failure',
          },
        );
      if (node.mountns) {
        // a node with a mount namespace of its own (a kubeadm lab's): both entered, as the node's kubelet runs them.
        // nsenter's own failure exits 1 as a script may: entering is tried first, alone, so the script's codes stay its own
        await access(node.mountns).catch(() => {
          throw new KrError(
            'NODE_UNREACHABLE',
            `node ${quote(node.name)}: there is no mount namespace file ${quote(node.mountns!)} on this machine`,
          );
        });
        const enter = ['nsenter', `--net=${dir}/${ns}`, `--mount=${node.mountns}`, '--'] as const;
        const tried = await runProcess({ ...spec, argv: [...enter, 'true'], stdin: '' }, deps);
        if (tried.code !== 0) throw cannotEnter(`namespaces ${quote(ns)} and ${quote(node.mountns)}`, tried);
        return runProcess({ ...spec, argv: [...enter, 'sh', '-s'], stdin }, deps);
      }
      const r = await runProcess({ ...spec, argv: ['ip', 'netns', 'exec', ns, 'sh', '-s'], stdin }, deps);
      if (!netnsTransient(r)) return r;
      throw cannotEnter(`network namespace ${quote(ns)}`, r);
    },
  };
}
