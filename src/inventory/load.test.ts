import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { krFailure } from '../testing/kr-failure.js';
import { loadInventory, parseInventoryText } from './load.js';

const fixtures = fileURLToPath(new URL('../../test/fixtures/', import.meta.url));
const examples = fileURLToPath(new URL('../../examples/', import.meta.url));

describe('loadInventory', () => {
  it('loads an inventory, defaults applied, paths as written, dir to resolve them', async () => {
    const file = join(fixtures, 'valid', 'inventory-lab.yaml');
    const { inventory, dir, where } = await loadInventory(file);
    expect(dir).toBe(dirname(file));
    expect(inventory.spec.kubeconfig).toBe('../kubeconfig');
    expect(inventory.spec.transport).toEqual({ type: 'netns' });
    expect(inventory.spec.controller).toEqual({
      nodeMonitorGracePeriod: 8000,
      nodeMonitorPeriod: 1000,
      defaultTolerationSeconds: 30,
      leaseDuration: 8000,
    });
    expect(inventory.spec.nodes.map((n) => [n.name, n.roles, n.zone])).toEqual([
      ['cp-1', ['control-plane', 'etcd'], 'zone-a'],
      ['node-1', ['worker'], 'zone-a'],
      ['node-2', ['worker'], 'zone-b'],
    ]);
    expect(inventory.spec.nodes[2]!.transport).toEqual({
      type: 'ssh',
      user: 'admin',
      connectTimeout: 5000,
      strictHostKeyChecking: 'yes',
      sudo: false,
      ignoreUserConfig: false,
    });
    expect(where(['spec', 'nodes', 2, 'transport', 'user'])).toBe(`${file}:17:36`);
  });

  it('loads the shipped example', async () => {
    const { inventory } = await loadInventory(join(examples, 'inventory-local.yaml'));
    expect(inventory.spec.layout).toBe('kubeadm');
    expect(inventory.spec.transport).toEqual({ type: 'local' });
  });

  it('reports every problem with its position: enums, discriminated transports, durations, duplicate names, unknown keys', async () => {
    const file = join(fixtures, 'invalid', 'bad-inventory.yaml');
    const e = await krFailure(loadInventory(file));
    expect(e.code).toBe('INVENTORY_INVALID');
    expect(e.exit).toBe(2);
    expect(e.message).toBe(`${file}: 6 problems`);
    expect(e.details).toEqual([
      `${file}:6:11: spec.layout: expected one of kubeadm, k3s, lab; did you mean "kubeadm"? (got "kubeadmin")`,
      `${file}:7:21: spec.transport.type: expected one of ssh, netns, local, agent; did you mean "ssh"? (got "sshh")`,
      `${file}:9:29: spec.controller.nodeMonitorGracePeriod: expected a duration such as 500ms, 10s, 5m or 1h (got 40)`,
      `${file}:12:15: spec.nodes[0].roles[0]: expected one of control-plane, worker, etcd, load-balancer (got "master")`,
      `${file}:13:13: spec.nodes[1].name: duplicate node name (first at 11:13) (got "node-1")`,
      `${file}:14:7: spec.nodes[1].adress: unknown key "adress" (did you mean "address"?)`,
    ]);
  });

  it('a transport without its type', async () => {
    const e = await krFailure(
      parseInventoryText(
        'apiVersion: kube-runbook/v1\nkind: Inventory\nmetadata: {name: x}\nspec:\n  layout: lab\n  transport:\n    user: root\n  nodes: [{name: a}]\n',
        'inv.yaml',
      ),
    );
    expect(e.details).toEqual(['inv.yaml:6:3: spec.transport: missing required key "type" (expected one of ssh, netns, local, agent)']);
  });

  it('empty files and files that are not inventories', async () => {
    expect((await krFailure(parseInventoryText('', 'e.yaml'))).details).toEqual(['e.yaml:1:1: the file is empty; expected an Inventory']);
    expect((await krFailure(parseInventoryText('[1, 2]', 'l.yaml'))).details).toEqual([
      'l.yaml:1:1: expected a mapping with apiVersion, kind, metadata, spec (got a list)',
    ]);
  });

  it('a missing file', async () => {
    const e = await krFailure(loadInventory('no/such/inventory.yaml'));
    expect(e.code).toBe('FILE_UNREADABLE');
    expect(e.exit).toBe(2);
    expect(e.message).toBe('cannot read no/such/inventory.yaml: no such file');
  });

  it('node names are RFC 1123 names, addresses host names or IPs, ssh values never options', async () => {
    const text = `apiVersion: kube-runbook/v1
kind: Inventory
metadata: {name: x}
spec:
  layout: lab
  transport: {type: ssh, user: -oProxyCommand=x, jumpHost: "bastion;rm"}
  nodes:
    - {name: ../../x, address: 10.0.0.1}
    - {name: Node_1, address: "-oProxyCommand=sh"}
    - {name: ok-1, address: "fd00::1", netns: ../etc}
    - {name: ok-2.example.com, address: host-2.example.com, transport: {type: ssh, jumpHost: "admin@[fd00::9]:2222"}}
`;
    const e = await krFailure(parseInventoryText(text, 'inv.yaml'));
    expect(e.exit).toBe(2);
    expect(e.details).toEqual([
      'inv.yaml:6:32: spec.transport.user: expected a user name (letters, digits, "_", "." and "-", not first) (got "-oProxyCommand=x")',
      'inv.yaml:6:60: spec.transport.jumpHost: expected [user@]host[:port] (several separated by commas) with host names or IP addresses (got "bastion;rm")',
      'inv.yaml:8:14: spec.nodes[0].name: expected a Node name: lowercase letters, digits, "-" and "." (RFC 1123), at most 253 characters (got "../../x")',
      'inv.yaml:9:14: spec.nodes[1].name: expected a Node name: lowercase letters, digits, "-" and "." (RFC 1123), at most 253 characters (got "Node_1")',
      'inv.yaml:9:31: spec.nodes[1].address: expected a host name (RFC 1123) or an IP address (got "-oProxyCommand=sh")',
      'inv.yaml:10:47: spec.nodes[2].netns: expected a network namespace name (letters, digits, "_", "." and "-") (got "../etc")',
    ]);
  });
});
