import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { root, runCli, writeKubeconfig } from './helpers/cli.js';

const tmp = mkdtempSync(join(tmpdir(), 'kr-cli-plan-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** A kubeconfig whose one context points at SERVER. */
const kubeconfig = (name: string, server: string) => writeKubeconfig(join(tmp, name), server, ['closed']);

/** Nothing listens on port 1: connecting is refused at once. */
const closedPort = kubeconfig('closed', 'https://127.0.0.1:1');
const env = { KUBE_RUNBOOK_INVENTORY: '', KUBECONFIG: '' };
const plan = (...args: string[]) => runCli(['plan', ...args], env);

describe('kube-runbook plan against a cluster it cannot reach', () => {
  it('says which apiserver did not answer, points to --offline, prints no plan and exits 3', async () => {
    const r = await plan('runbooks/apiserver-outage.yaml', '-i', 'examples/inventory-kubeadm.yaml', '--kubeconfig', closedPort);
    expect(r.code).toBe(3);
    expect(r.stderr).toContain('cannot plan: the apiserver https://127.0.0.1:1 of context "closed" does not answer');
    expect(r.stderr).toContain('[KUBE_UNAVAILABLE]');
    expect(r.stderr).toContain('`plan --offline` plans without a cluster');
    expect(r.stdout).toBe('');
    expect(r.stderr).not.toMatch(/^\s+at /m);
  });

  it('a kubeconfig that does not exist is bad input: exit 2 naming where it was named, whichever source', async () => {
    const missing = join(tmp, 'missing');
    const inv = join(tmp, 'inventory-missing.yaml');
    const inventory = (file: string, kubeconfigLine: string) =>
      writeFileSync(
        file,
        `apiVersion: kube-runbook/v1\nkind: Inventory\nmetadata: {name: m}\nspec:\n  layout: kubeadm\n${kubeconfigLine}  nodes: [{name: n1}]\n`,
      );
    inventory(inv, '  kubeconfig: missing\n');
    const none = join(tmp, 'inventory-none.yaml');
    inventory(none, '');
    const home = { ...env, HOME: tmp };
    const cases: [string[], Record<string, string>, string][] = [
      [['-i', none, '--kubeconfig', missing], env, `the kubeconfig "${missing}" (from --kubeconfig) does not exist [KUBECONFIG_MISSING]`],
      [['-i', inv], { ...env, KUBECONFIG: missing }, `$KUBECONFIG names no file that exists (got "${missing}") [KUBECONFIG_MISSING]`],
      [
        ['-i', inv],
        env,
        `the inventory's spec.kubeconfig at ${inv}:6:15 names the kubeconfig "${missing}", which does not exist [KUBECONFIG_MISSING]`,
      ],
      [
        ['-i', none],
        home,
        `no kubeconfig: ~/.kube/config ("${join(tmp, '.kube', 'config')}") does not exist; give --kubeconfig or set KUBECONFIG [KUBECONFIG_MISSING]`,
      ],
    ];
    for (const [args, e, message] of cases) {
      const r = await runCli(['plan', 'runbooks/apiserver-outage.yaml', ...args], e);
      expect([r.code, r.stderr.split('\n')[0]]).toEqual([2, `kube-runbook: ${message}`]);
      expect(r.stdout).toBe('');
    }
  }, 120_000);
});

describe('kube-runbook plan --offline', () => {
  /** A TCP server that counts the connections made to it and closes each. */
  async function listener(): Promise<{ server: Server; port: number; connections: () => number }> {
    let n = 0;
    const server = createServer((s) => {
      n++;
      s.destroy();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return { server, port: (server.address() as { port: number }).port, connections: () => n };
  }

  it('plans without connecting to the cluster of the inventory, says so in one line and exits 0', async () => {
    const l = await listener();
    try {
      // the inventory names the kubeconfig, which points at the listener
      kubeconfig('listening', `https://127.0.0.1:${l.port}`);
      const inv = join(tmp, 'inventory.yaml');
      const example = readFileSync(join(root, 'examples/inventory-kubeadm.yaml'), 'utf8');
      writeFileSync(
        inv,
        example.replace(/^ {2}kubeconfig: .*$/m, '  kubeconfig: listening').replace(/^ {2}context: .*$/m, '  context: closed'),
      );
      const offline = await plan('runbooks/apiserver-outage.yaml', '-i', inv, '--offline');
      expect(offline.code).toBe(0);
      expect(offline.stdout).toContain('stop-apiserver on cp-1, cp-2, cp-3');
      expect(offline.stdout.trimEnd().split('\n').at(-1)).toBe('Planned offline: no cluster was contacted. Nothing was touched.');
      expect(l.connections()).toBe(0);
      // without --offline the same inventory's cluster is asked (and the plan fails, as it does not answer)
      const online = await plan('runbooks/apiserver-outage.yaml', '-i', inv);
      expect(online.code).toBe(3);
      expect(l.connections()).toBeGreaterThan(0);
    } finally {
      l.server.close();
    }
  });

  it('says in JSON that it planned offline, with no context', async () => {
    const r = await plan('runbooks/apiserver-outage.yaml', '-i', 'examples/inventory-kubeadm.yaml', '--offline', '-o', 'json');
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ runbook: 'apiserver-outage', context: null, offline: true });
  });

  it('refuses --offline with --kubeconfig or --context, which it would not use (exit 2)', async () => {
    const r = await plan('runbooks/apiserver-outage.yaml', '-i', 'examples/inventory-kubeadm.yaml', '--offline', '--context', 'prod');
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("option '--offline' cannot be used with option '--context <name>'");
  });

  it('refuses a label selector, which needs the cluster, naming it (exit 3)', async () => {
    const rb = join(tmp, 'labels.yaml');
    writeFileSync(
      rb,
      `apiVersion: kube-runbook/v1
kind: Runbook
metadata: {name: labels}
spec:
  steps:
    - {action: stop-kubelet, with: {nodes: {selector: "tier=web"}}}
`,
    );
    const r = await plan(rb, '-i', 'examples/inventory-kubeadm.yaml', '--offline');
    expect(r.code).toBe(3);
    expect(r.stderr).toContain('label selector "tier=web" needs the cluster\'s Node labels, and this plan has no cluster');
  });
});

describe('kube-runbook plan durations', () => {
  it('writes durations in parameters as a person does, never as milliseconds', async () => {
    const r = await plan('runbooks/apiserver-outage.yaml', '-i', 'examples/inventory-kubeadm.yaml', '--offline');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('eviction-forecast {margin: 20s, nodes: all,');
    expect(r.stdout).toContain('flapping: {"transitions":3,"window":"5m"}} to read ok within 1m');
    expect(r.stdout).toContain('stop-apiserver on cp-1, cp-2, cp-3 {timeout: 2m}');
    expect(r.stdout).not.toMatch(/\b\d{4,}\b/);
  });

  it('gives named waits their duration, and unnamed ones once', async () => {
    const named = await plan('runbooks/apiserver-outage.yaml', '-i', 'examples/inventory-kubeadm.yaml', '--offline');
    expect(named.stdout).toMatch(/^ {2}4\. the outage lasts — wait 15s$/m);
    expect(named.stdout).toMatch(/^ {2}7\. the kubelets stay cut off past the toleration — wait 1m30s$/m);
    const unnamed = await plan('examples/guards-and-remediation.yaml', '-i', 'examples/inventory-local.yaml', '--offline');
    expect(unnamed.stdout).toMatch(/^ {2}4\. wait 30s$/m);
    expect(unnamed.stdout).toContain('command {run: ! test -e /tmp/kube-runbook-example-trouble, interval: 1s');
  });
});
