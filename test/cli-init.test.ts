import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { root, runCli, writeKubeconfig } from './helpers/cli.js';
import { Terminal } from './helpers/terminal.js';

const tmp = mkdtempSync(join(tmpdir(), 'kr-cli-init-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const env = { KUBE_RUNBOOK_INVENTORY: '', KUBECONFIG: '', KUBE_RUNBOOK_LAB_HOME: '', XDG_STATE_HOME: '/x/state', HOME: tmp };
/** A kubeconfig of two contexts, lab (current) and prod, whose apiserver refuses connections at once. */
const twoContexts = writeKubeconfig(join(tmp, 'kubeconfig'), 'https://127.0.0.1:1', ['lab', 'prod']);

/** What a user fills in for init's TODOs (nodes that could not be listed). */
const filled = (text: string) =>
  text
    .replace(/"TODO: a control-plane Node's name"/g, 'cp-1')
    .replace(/"TODO: worker (\d+)'s Node name"/g, 'node-$1')
    .replace(/"TODO: the address ssh connects to"/g, '192.0.2.1');

describe('kube-runbook init', () => {
  it.each([
    ['kubeadm', 'kubeadm', 4],
    ['k3s', 'k3s', 4],
    ['lab', 'lab', 4],
    ['agent', 'kubeadm', 3],
  ])(
    '--layout %s with no cluster to ask: the nodes are TODOs validate names; filled in, validate and plan --offline accept the files',
    async (layout, inventoryLayout, nodes) => {
      const dir = join(tmp, layout);
      const context = 'arn:aws:eks:eu-west-1:123456789012:cluster/prod';
      const init = await runCli(['init', '--layout', layout, '--nodes', '3', '--context', context, '--dir', dir], env);
      expect(init.code, init.stderr).toBe(0);
      expect(init.stdout).toContain(
        `wrote ${join(dir, 'runbook.yaml')} and ${join(dir, 'inventory.yaml')} (layout ${layout}, 3 worker nodes, context ${context})`,
      );
      const inventoryFile = join(dir, 'inventory.yaml');
      if (layout !== 'lab') {
        const todos = await runCli(['validate', dir], env);
        expect(todos.code).toBe(2);
        expect(todos.stderr).toContain(`${inventoryFile}:14:14: spec.nodes[0].name: left to fill in:`);
        writeFileSync(inventoryFile, filled(readFileSync(inventoryFile, 'utf8')));
      }
      const validate = await runCli(['validate', dir], env);
      expect(validate.code, validate.stdout).toBe(0);
      expect(validate.stdout).toContain(`(Inventory starter-${layout}, ${nodes} nodes, layout ${inventoryLayout})`);
      expect(validate.stdout).toContain('(Runbook starter-kubelet-stop, 3 steps, 2 guards)');
      const plan = await runCli(['plan', join(dir, 'runbook.yaml'), '-i', inventoryFile, '--offline'], env);
      expect(plan.code, plan.stderr).toBe(0);
      expect(plan.stdout).toContain('revert step 2: stop-kubelet on node-1');
      const runbook = parse(readFileSync(join(dir, 'runbook.yaml'), 'utf8'));
      expect(runbook.spec.safety.allowContexts).toEqual([context]);
      const inventory = parse(readFileSync(inventoryFile, 'utf8'));
      expect(inventory.spec.context).toBe(context);
      // the lab's: where `kube-runbook-lab up` keeps its state and kubeconfig
      if (layout === 'lab')
        expect(inventory.spec).toMatchObject({
          lab: { stateDir: '/x/state/kube-runbook/lab/lab' },
          kubeconfig: '/x/state/kube-runbook/lab/lab/kubeconfig',
        });
    },
    120_000,
  );

  it("takes the kubeconfig's current context with no terminal; --context prod takes prod; validate names what the cluster did not say", async () => {
    const current = await runCli(['init', '--dir', join(tmp, 'current')], { ...env, KUBECONFIG: twoContexts });
    expect(current.code, current.stderr).toBe(0);
    expect(current.stdout).toContain('(layout TODO, 2 worker nodes, context lab)');
    expect(current.stdout).toContain('  context lab (https://127.0.0.1:1) could not be read: connect ECONNREFUSED 127.0.0.1:1');
    expect(current.stdout).toContain(`next: fill in 7 TODOs (kube-runbook validate ${join(tmp, 'current')} names each)`);
    expect(parse(readFileSync(join(tmp, 'current', 'runbook.yaml'), 'utf8')).spec.safety.allowContexts).toEqual(['lab']);
    const validate = await runCli(['validate', join(tmp, 'current')], env);
    expect(validate.code).toBe(2);
    expect(validate.stderr).toContain(`${join(tmp, 'current', 'inventory.yaml')}:9:11: spec.layout: left to fill in: kubeadm, k3s or lab`);
    const prod = await runCli(['init', '--dir', join(tmp, 'prod'), '--kubeconfig', twoContexts, '--context', 'prod'], env);
    expect(prod.code, prod.stderr).toBe(0);
    expect(parse(readFileSync(join(tmp, 'prod', 'inventory.yaml'), 'utf8')).spec).toMatchObject({
      context: 'prod',
      kubeconfig: twoContexts,
    });
  }, 120_000);

  it('with no kubeconfig, no terminal and no flags: the context and the layout are TODOs', async () => {
    const dir = join(tmp, 'defaults');
    const r = await runCli(['init', '--dir', dir], env);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('(layout TODO, 2 worker nodes, context TODO)');
    expect(r.stdout).toContain('  no kubeconfig was found: nothing could be read from a cluster');
    expect((await runCli(['validate', join(dir, 'runbook.yaml')], env)).stderr).toContain(
      'runbook.yaml:9:28: spec.safety.allowContexts[0]: left to fill in: the kubeconfig context to run against',
    );
  }, 120_000);

  it('leaves files that exist alone unless --force (exit 2)', async () => {
    const dir = join(tmp, 'exists');
    expect((await runCli(['init', '--dir', dir], env)).code).toBe(0);
    writeFileSync(join(dir, 'runbook.yaml'), 'mine\n');
    const again = await runCli(['init', '--dir', dir, '--layout', 'k3s'], env);
    expect(again.code).toBe(2);
    expect(again.stderr).toContain(`${join(dir, 'runbook.yaml')} exists: nothing was written (--force overwrites) [INIT_EXISTS]`);
    expect(readFileSync(join(dir, 'runbook.yaml'), 'utf8')).toBe('mine\n');
    expect((await runCli(['init', '--dir', dir, '--layout', 'k3s', '--force'], env)).code).toBe(0);
    expect(readFileSync(join(dir, 'inventory.yaml'), 'utf8')).toContain('layout: k3s');
  }, 120_000);

  it('names a bad value and exits 2', async () => {
    const nodes = await runCli(['init', '--dir', join(tmp, 'bad'), '--nodes', 'three'], env);
    expect(nodes.code).toBe(2);
    expect(nodes.stderr).toContain('--nodes: expected a number of worker nodes from 1 to 500 (got "three") [INIT_BAD_NODES]');
    const layout = await runCli(['init', '--dir', join(tmp, 'bad'), '--layout', 'eks'], env);
    expect(layout.code).toBe(2);
    expect(layout.stderr).toContain("option '--layout <layout>' argument 'eks' is invalid. Allowed choices are kubeadm, k3s, lab, agent.");
    expect(`${nodes.stderr}${layout.stderr}`).not.toMatch(/^\s+at /m);
  });

  /** `init` on a terminal, with the two contexts. */
  const terminal = (dir: string) =>
    new Terminal(`'${process.execPath}' bin/kube-runbook.js init --dir '${dir}'`, { cwd: root, env: { ...env, KUBECONFIG: twoContexts } });

  it('on a terminal: offers the contexts, asks again after a typo, and asks for what the cluster did not say', async () => {
    const dir = join(tmp, 'asked');
    const t = terminal(dir);
    const offered = await t.type('', /\(number or name\) \[lab\]: $/);
    expect(offered).toContain('kubeconfig contexts:\r\n  1) lab (current)\r\n  2) prod\r\n');
    expect(await t.type('3\r', /\(got "3"\)\r?\n[^\n]*\(number or name\) \[lab\]: $/)).toContain(
      'expected a number from 1 to 2 or one of lab, prod (got "3")',
    );
    await t.type('2\r', /layout \(kubeadm, k3s, lab, agent\) \[kubeadm\]: $/);
    await t.type('k3s\r', /control-plane Node names, comma-separated \(empty: leave a TODO\): $/);
    await t.type('server-1\r', /worker Node names, comma-separated \(empty: leave TODOs\): $/);
    await t.type('agent-1, agent-2\r', /next: kube-runbook plan .*\r?\n/);
    expect(await t.end()).toBe(0);
    const inventory = parse(readFileSync(join(dir, 'inventory.yaml'), 'utf8'));
    expect(inventory.spec).toMatchObject({ layout: 'k3s', context: 'prod' });
    expect(inventory.spec.nodes.map((n: { name: string }) => n.name)).toEqual(['server-1', 'agent-1', 'agent-2']);
    expect((await runCli(['validate', dir], env)).code).toBe(0);
  }, 120_000);

  it.each([
    ['Ctrl-C', '\x03', 'interrupted (Ctrl-C)'],
    ['Ctrl-D', '\x04', 'input ended (Ctrl-D)'],
  ])(
    '%s at a question: exit 130 with one line, nothing written',
    async (_key, key, how) => {
      const dir = join(tmp, `stopped-${key.charCodeAt(0)}`);
      const t = terminal(dir);
      await t.type('', /\(number or name\) \[lab\]: $/);
      const shown = await t.type(key, /\[INTERRUPTED\]\r?\n/);
      expect(await t.end()).toBe(130);
      expect(shown.split(/\r?\n/).filter((l) => l.trim())).toEqual([
        `kube-runbook: ${how} at a question: nothing was written [INTERRUPTED]`,
      ]);
      expect(existsSync(join(dir, 'runbook.yaml'))).toBe(false);
    },
    120_000,
  );
});
