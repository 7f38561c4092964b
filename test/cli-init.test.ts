import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { root, runCli } from './helpers/cli.js';
import { Terminal } from './helpers/terminal.js';

const tmp = mkdtempSync(join(tmpdir(), 'kr-cli-init-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const env = { KUBE_RUNBOOK_INVENTORY: '', KUBECONFIG: '', KUBE_RUNBOOK_LAB_HOME: '', XDG_STATE_HOME: '/x/state' };

describe('kube-runbook init', () => {
  it.each([
    ['kubeadm', 'kubeadm', 4],
    ['k3s', 'k3s', 4],
    ['lab', 'lab', 4],
    ['agent', 'kubeadm', 3],
  ])(
    '--layout %s writes a runbook and an inventory that validate and plan --offline accept as written',
    async (layout, inventoryLayout, nodes) => {
      const dir = join(tmp, layout);
      const context = 'arn:aws:eks:eu-west-1:123456789012:cluster/prod';
      const init = await runCli(['init', '--layout', layout, '--nodes', '3', '--context', context, '--dir', dir], env);
      expect(init.code, init.stderr).toBe(0);
      expect(init.stdout).toContain(
        `wrote ${join(dir, 'runbook.yaml')} and ${join(dir, 'inventory.yaml')} (layout ${layout}, 3 worker nodes, context ${context})`,
      );
      const validate = await runCli(['validate', dir], env);
      expect(validate.code, validate.stderr).toBe(0);
      expect(validate.stdout).toContain(`(Inventory starter-${layout}, ${nodes} nodes, layout ${inventoryLayout})`);
      expect(validate.stdout).toContain('(Runbook starter-kubelet-stop, 3 steps, 2 guards)');
      const plan = await runCli(['plan', join(dir, 'runbook.yaml'), '-i', join(dir, 'inventory.yaml'), '--offline'], env);
      expect(plan.code, plan.stderr).toBe(0);
      expect(plan.stdout).toContain('revert step 2: stop-kubelet on node-1');
      const runbook = parse(readFileSync(join(dir, 'runbook.yaml'), 'utf8'));
      expect(runbook.spec.safety.allowContexts).toEqual([context]);
      const inventory = parse(readFileSync(join(dir, 'inventory.yaml'), 'utf8'));
      expect(inventory.spec.context).toBe(context);
      // the lab's: where `kube-runbook-lab up` keeps its state and kubeconfig
      if (layout === 'lab')
        expect(inventory.spec).toMatchObject({
          lab: { stateDir: '/x/state/kube-runbook/lab/lab' },
          kubeconfig: '/x/state/kube-runbook/lab/lab/kubeconfig',
        });
    },
  );

  it("takes defaults with no terminal and no flags: kubeadm, 2 workers, kubeadm's context", async () => {
    const dir = join(tmp, 'defaults');
    const r = await runCli(['init', '--dir', dir], env);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('(layout kubeadm, 2 worker nodes, context kubernetes-admin@kubernetes)');
  });

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
  });

  it('names a bad value and exits 2', async () => {
    const nodes = await runCli(['init', '--dir', join(tmp, 'bad'), '--nodes', 'three'], env);
    expect(nodes.code).toBe(2);
    expect(nodes.stderr).toContain('--nodes: expected a number of worker nodes from 1 to 500 (got "three") [INIT_BAD_NODES]');
    const layout = await runCli(['init', '--dir', join(tmp, 'bad'), '--layout', 'eks'], env);
    expect(layout.code).toBe(2);
    expect(layout.stderr).toContain("option '--layout <layout>' argument 'eks' is invalid. Allowed choices are kubeadm, k3s, lab, agent.");
    expect(`${nodes.stderr}${layout.stderr}`).not.toMatch(/^\s+at /m);
  });

  it('asks on a terminal for what the flags do not say', async () => {
    const dir = join(tmp, 'asked');
    const t = new Terminal(`'${process.execPath}' bin/kube-runbook.js init --dir '${dir}'`, { cwd: root, env });
    await t.type('', /layout \(kubeadm, k3s, lab, agent\) \[kubeadm\]: $/);
    await t.type('k3s\r', /worker nodes \[2\]: $/);
    await t.type('5\r', /may run against \[default\]: $/);
    await t.type('\r', /layout k3s, 5 worker nodes, context default\)/);
    expect(await t.end()).toBe(0);
    const inventory = parse(readFileSync(join(dir, 'inventory.yaml'), 'utf8'));
    expect(inventory.spec).toMatchObject({ layout: 'k3s', context: 'default' });
    expect(inventory.spec.nodes).toHaveLength(6);
  }, 60_000);
});
