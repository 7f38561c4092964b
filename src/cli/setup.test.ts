import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { silentLogger } from '../core/logger.js';
import { parseInventoryText } from '../inventory/load.js';
import { FakeClock } from '../testing/fake-clock.js';
import { connect } from './cluster.js';
import { krThrown } from '../testing/kr-failure.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'kr-setup-'));
  vi.stubEnv('HOME', dir);
  vi.stubEnv('KUBECONFIG', '');
});
afterEach(() => {
  vi.unstubAllEnvs();
  rmSync(dir, { recursive: true, force: true });
});

/** A kubeconfig at PATH whose one context `ctx` reaches SERVER. */
function kubeconfig(path: string, server: string): string {
  const file = join(dir, path);
  mkdirSync(join(file, '..'), { recursive: true });
  writeFileSync(
    file,
    `apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "${server}"}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: ctx, context: {cluster: c, user: u}}]\ncurrent-context: ctx\n`,
  );
  return file;
}

/** An inventory in DIR naming KUBECONFIG (relative to it) on its 7th line. */
const inventory = (kubeconfigLine?: string) =>
  parseInventoryText(
    `apiVersion: kube-runbook/v1
kind: Inventory
metadata: {name: t}
spec:
  layout: kubeadm
  context: ctx
${kubeconfigLine ? `  kubeconfig: ${kubeconfigLine}\n` : ''}  nodes: [{name: n1}]
`,
    join(dir, 'inv.yaml'),
  );

const server = async (o: { kubeconfig?: string }, kubeconfigLine?: string) =>
  connect(o, await inventory(kubeconfigLine), new FakeClock(0), silentLogger).server;

describe('the kubeconfig, found as kubectl finds it', () => {
  it('--kubeconfig before $KUBECONFIG', async () => {
    const flag = kubeconfig('flag', 'https://flag:6443');
    vi.stubEnv('KUBECONFIG', kubeconfig('env', 'https://env:6443'));
    kubeconfig('.kube/config', 'https://home:6443');
    expect(await server({ kubeconfig: flag }, 'inv-kubeconfig')).toBe('https://flag:6443');
  });

  it("$KUBECONFIG before the inventory's spec.kubeconfig, and the error says which won", async () => {
    kubeconfig('inv-kubeconfig', 'https://inventory:6443');
    vi.stubEnv('KUBECONFIG', kubeconfig('env', 'https://env:6443'));
    expect(await server({}, 'inv-kubeconfig')).toBe('https://env:6443');
    const inv = await inventory('inv-kubeconfig');
    const e = krThrown(() => connect({ context: 'other' }, inv, new FakeClock(0), silentLogger));
    expect(e.details[0]).toContain(
      `(from $KUBECONFIG, which comes before the inventory's spec.kubeconfig at ${join(dir, 'inv.yaml')}:7:15)`,
    );
  });

  it("the inventory's spec.kubeconfig (relative to it) before ~/.kube/config", async () => {
    kubeconfig('inv-kubeconfig', 'https://inventory:6443');
    kubeconfig('.kube/config', 'https://home:6443');
    expect(await server({}, 'inv-kubeconfig')).toBe('https://inventory:6443');
  });

  it('~/.kube/config when nothing else names one', async () => {
    kubeconfig('.kube/config', 'https://home:6443');
    expect(await server({})).toBe('https://home:6443');
  });

  it('a kubeconfig that does not exist: exit 2 naming its source', async () => {
    const cases: [{ kubeconfig?: string }, string | undefined, string | undefined, string][] = [
      [
        { kubeconfig: join(dir, 'absent') },
        undefined,
        undefined,
        `the kubeconfig "${join(dir, 'absent')}" (from --kubeconfig) does not exist`,
      ],
      [{}, join(dir, 'absent'), undefined, `$KUBECONFIG names no file that exists (got "${join(dir, 'absent')}")`],
      [
        {},
        undefined,
        'absent',
        `the inventory's spec.kubeconfig at ${join(dir, 'inv.yaml')}:7:15 names the kubeconfig "${join(dir, 'absent')}", which does not exist`,
      ],
      [
        {},
        undefined,
        undefined,
        `no kubeconfig: ~/.kube/config ("${join(dir, '.kube', 'config')}") does not exist; give --kubeconfig or set KUBECONFIG`,
      ],
    ];
    for (const [o, env, line, message] of cases) {
      vi.stubEnv('KUBECONFIG', env ?? '');
      const inv = await inventory(line);
      const e = krThrown(() => connect(o, inv, new FakeClock(0), silentLogger));
      expect([e.code, e.exit, e.message]).toEqual(['KUBECONFIG_MISSING', 2, message]);
    }
  });
});
