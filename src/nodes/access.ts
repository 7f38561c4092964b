import { EXIT, KrError, quote } from '../core/errors.js';
import type { Inventory, InventoryNode, Transport as TransportConfig } from '../inventory/schema.js';
import { agentTransport, type AgentTransportDeps } from './agent.js';
import { localTransport } from './local.js';
import { netnsTransport } from './netns.js';
import { sshTransport } from './ssh.js';
import type { ExecOptions, ExecResult, NodeAccess, Transport } from './types.js';

/** The machine the executor runs on, as a node for messages. */
const HERE: InventoryNode = { name: 'localhost', roles: ['worker'] };

/**
 * Nodes of an inventory, each reached through its own transport (`node.transport`, else `spec.transport`);
 * `execHere` runs on this machine. Transports are made once per distinct configuration. The agent transport needs
 * the cluster's client and the run's id in `deps`.
 */
export function createNodeAccess(inventory: Inventory, deps: AgentTransportDeps = {}): NodeAccess {
  const nodes = new Map<string, InventoryNode>();
  for (const n of inventory.spec.nodes) {
    if (nodes.has(n.name))
      throw new KrError('DUPLICATE_NODE', `the inventory ${quote(inventory.metadata.name)} names node ${quote(n.name)} twice`, {
        exit: EXIT.invalid,
      });
    nodes.set(n.name, n);
  }
  const local = localTransport(deps);
  const made = new Map<string, Transport>();
  const transportFor = (config: TransportConfig): Transport => {
    if (config.type === 'local') return local;
    const key = JSON.stringify(config);
    let t = made.get(key);
    if (!t) {
      t =
        config.type === 'ssh' ? sshTransport(config, deps) : config.type === 'agent' ? agentTransport(config, deps) : netnsTransport(deps);
      made.set(key, t);
    }
    return t;
  };

  const get = (name: string): InventoryNode => {
    const n = nodes.get(name);
    if (!n)
      throw new KrError('UNKNOWN_NODE', `there is no node ${quote(name)} in the inventory ${quote(inventory.metadata.name)}`, {
        exit: EXIT.invalid,
        details: [`nodes: ${[...nodes.keys()].join(', ')}`],
      });
    return n;
  };

  return {
    get,
    list: () => [...nodes.values()],
    async exec(name: string, script: string, options?: ExecOptions): Promise<ExecResult> {
      const node = get(name);
      return transportFor(node.transport ?? inventory.spec.transport).exec(node, script, options);
    },
    async execHere(script: string, options?: ExecOptions): Promise<ExecResult> {
      return local.exec(HERE, script, options);
    },
  };
}
