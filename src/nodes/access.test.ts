import { describe, expect, it } from 'vitest';
import { parseInventoryLoosely } from '../testing/loose-inventory.js';
import { memoryLogger } from '../core/logger.js';
import type { InventoryInput } from '../inventory/schema.js';
import { createNodeAccess } from './access.js';
import { inventoryOf } from '../testing/inventories.js';

const inventory = (nodes: InventoryInput['spec']['nodes'], transport?: InventoryInput['spec']['transport']) =>
  parseInventoryLoosely(inventoryOf({ layout: 'lab', ...(transport ? { transport } : {}), nodes }, 'test-inv'));

describe('createNodeAccess', () => {
  it('lists and finds the nodes of the inventory', () => {
    const nodes = createNodeAccess(inventory([{ name: 'a' }, { name: 'b', roles: ['control-plane'] }]));
    expect(nodes.list().map((n) => n.name)).toEqual(['a', 'b']);
    expect(nodes.get('b').roles).toEqual(['control-plane']);
  });

  it('refuses a node that is not in the inventory, quoting its name', async () => {
    const nodes = createNodeAccess(inventory([{ name: 'a' }]));
    expect(() => nodes.get('$(x)')).toThrow(expect.objectContaining({ code: 'UNKNOWN_NODE', message: expect.stringContaining('"$(x)"') }));
    await expect(nodes.exec('nope', 'true')).rejects.toMatchObject({ code: 'UNKNOWN_NODE', exit: 2 });
  });

  it('refuses an inventory that names a node twice', () => {
    expect(() => createNodeAccess(inventory([{ name: 'a' }, { name: 'a' }]))).toThrow(expect.objectContaining({ code: 'DUPLICATE_NODE' }));
  });

  it("reaches each node through its own transport, else the inventory's", async () => {
    const nodes = createNodeAccess(
      inventory(
        [
          { name: 'plain' },
          { name: 'in-ns', netns: 'krt-no-such-namespace', transport: { type: 'netns' } },
          { name: 'far', address: '-oProxyCommand=x', transport: { type: 'ssh' } },
        ],
        { type: 'local' },
      ),
    );
    expect(await nodes.exec('plain', 'echo "$0 on the executor"')).toEqual({ code: 0, stdout: 'sh on the executor\n', stderr: '' });
    await expect(nodes.exec('in-ns', 'true')).rejects.toMatchObject({
      code: 'NODE_UNREACHABLE',
      message: expect.stringContaining('no network namespace "krt-no-such-namespace"'),
    });
    await expect(nodes.exec('far', 'true')).rejects.toMatchObject({ code: 'BAD_SSH_TARGET' });
  });

  it('runs execHere on this machine whatever the inventory says', async () => {
    const nodes = createNodeAccess(inventory([{ name: 'n' }], { type: 'ssh', user: 'nobody' }));
    expect(await nodes.execHere('cat; exit 5', { input: 'in' })).toEqual({ code: 5, stdout: 'in', stderr: '' });
  });

  it('logs what ran where, never the script, its input or its output', async () => {
    const log = memoryLogger();
    const nodes = createNodeAccess(inventory([{ name: 'n' }]), { log });
    const secret = 'Bearer s3cr3t-t0ken.abc';
    await nodes.exec('n', `printf '%s' '${secret}'; cat >&2`, { input: 'password=hunter2' });
    const logged = JSON.stringify(log.lines);
    expect(log.lines).toEqual([expect.objectContaining({ msg: 'exec finished', fields: expect.objectContaining({ node: 'n', code: 0 }) })]);
    expect(logged).not.toContain('s3cr3t');
    expect(logged).not.toContain('hunter2');
  });
});
