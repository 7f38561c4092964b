import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { inventoryOf } from '../src/testing/inventories.js';
import { type Ran, runCli, writeKubeconfig } from './helpers/cli.js';

const tmp = mkdtempSync(join(tmpdir(), 'kr-cli-run-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const cli = (args: string[], env: Record<string, string> = {}) =>
  runCli(args, { KUBE_RUNBOOK_STATE_DIR: join(tmp, 'state'), KUBE_RUNBOOK_INVENTORY: '', KUBECONFIG: '', ...env });

const noStack = (r: Ran) => expect(`${r.stdout}${r.stderr}`).not.toMatch(/^\s+at /m);

// a cluster that does not answer: the context is allowed, nothing listens
const kubeconfig = writeKubeconfig(join(tmp, 'kubeconfig'), 'https://127.0.0.1:9', ['lab', 'production']);
const inventory = 'examples/inventory-local.yaml';
/** `run` of the guards-and-remediation example against that cluster, with these flags. */
const runExample = (...flags: string[]) =>
  cli(['run', 'examples/guards-and-remediation.yaml', '-i', inventory, '--kubeconfig', kubeconfig, ...flags]);

describe('kube-runbook plan / run / recover (no cluster needed)', () => {
  it('plan --offline prints steps, guards and the rollback order, and touches nothing', async () => {
    const r = await cli(['plan', 'examples/guards-and-remediation.yaml', '-i', inventory, '--offline']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/Steps:\n {2}1\. steady state/);
    expect(r.stdout).toContain('Guards (react to every reading');
    expect(r.stdout).toMatch(/Rollback \(always[^\n]*\n {2}1\. revert step 2: run-command on node-1\n {2}2\. wait until command/);
    expect(r.stdout).toContain('Nothing was touched.');
    expect(r.stdout).not.toContain('Sensitive permissions');
    noStack(r);
  });

  it('plan lists the sensitive grants the run needs, in text and in -o json', async () => {
    const file = join(tmp, 'load.yaml');
    writeFileSync(
      file,
      [
        'apiVersion: kube-runbook/v1',
        'kind: Runbook',
        'metadata: {name: load}',
        'spec:',
        '  safety: {allowContexts: [lab]}',
        '  steps:',
        '    - {name: load, action: load-apiserver, with: {qps: 10, concurrency: 2, identity: existing, as: default/load, requests: [{verb: list, resource: pods, weight: 1}]}}',
      ].join('\n'),
    );
    const text = await cli(['plan', file, '-i', inventory, '--offline']);
    expect(text.stdout).toMatch(
      /\nSensitive permissions the run needs [^\n]*:\n( {2}- [^\n]*\n)* {2}- impersonate serviceaccounts load in default: acts as load/,
    );
    const json = await cli(['plan', file, '-i', inventory, '--offline', '-o', 'json']);
    expect(JSON.parse(json.stdout).sensitiveGrants).toContainEqual({
      grant: 'create namespaces (cluster-wide)',
      why: expect.stringContaining("a Pod Security level of 'privileged'"),
    });
  });

  it('run --dry-run shows the plan, runs the read-only preflight and is refused as the run would be (exit 3)', async () => {
    const r = await runExample('--dry-run');
    expect(r.stdout).toContain('DRY RUN: nothing is executed.');
    expect(r.stdout).toMatch(/Steps:\n {2}1\. steady state/);
    expect(r.stdout).toContain('preflight ok   context: context "lab" is allowed');
    expect(r.stdout).toMatch(/preflight FAIL cluster: apiserver https:\/\/127.0.0.1:9 does not answer/);
    expect(r.stdout).toContain('REFUSED: a run would be refused');
    expect(r.code).toBe(3);
    const other = await runExample('--context', 'production', '--dry-run');
    expect(other.code).toBe(3);
    expect(other.stdout).toContain('context "production" is not in spec.safety.allowContexts');
    noStack(r);
  }, 60_000);

  it('run refuses a context the runbook does not allow: exit 3, nothing applied', async () => {
    const r = await runExample('--context', 'production');
    expect(r.code).toBe(3);
    expect(r.stdout).toContain('context "production" is not in spec.safety.allowContexts (kind-*, lab)');
    expect(r.stdout).toMatch(/REFUSED/);
    expect(r.stdout).not.toContain('applied run-command');
    noStack(r);
  });

  it('run refuses a runbook that allows every context unless --context names one: exit 2 at the "*"', async () => {
    for (const file of [
      'runbooks/emergency/freeze-evictions.yaml',
      'runbooks/emergency/control-plane-failover.yaml',
      'runbooks/emergency/shed-apiserver-load.yaml',
    ]) {
      const r = await cli(['run', file, '-i', inventory, '--kubeconfig', kubeconfig, '--yes']);
      expect(r.code).toBe(2);
      // where the "*" is in the file, as an editor counts (1-based line and column)
      const lines = readFileSync(file, 'utf8').split('\n');
      const line = lines.findIndex((l) => l.includes('allowContexts: ["*"]'));
      const at = `${line + 1}:${lines[line]!.indexOf('"*"') + 1}`;
      expect(r.stderr).toMatch(
        new RegExp(
          `^kube-runbook: ${file.replace(/[.]/g, '\\.')}:${at}: spec\\.safety\\.allowContexts\\[0\\]: "\\*" allows every context: name the one to run against with --context NAME`,
        ),
      );
      expect(r.stdout).not.toContain('preflight');
      noStack(r);
    }
    const named = await cli([
      'run',
      'runbooks/emergency/freeze-evictions.yaml',
      '-i',
      inventory,
      '--kubeconfig',
      kubeconfig,
      '--context',
      'production',
      '--dry-run',
    ]);
    expect(named.stdout).toContain('preflight ok   context: context "production" is allowed');
    expect(named.code).toBe(3);
  }, 60_000);

  it('run takes a pattern that names no cluster as "*": ?* and *@?* need --context (exit 2)', async () => {
    const emergency = readFileSync('runbooks/emergency/freeze-evictions.yaml', 'utf8');
    for (const pattern of ['?*', '*@?*']) {
      const file = join(tmp, `allow-${pattern.length}.yaml`);
      writeFileSync(file, emergency.replace('allowContexts: ["*"]', `allowContexts: ["staging-*", ${JSON.stringify(pattern)}]`));
      const r = await cli(['run', file, '-i', inventory, '--kubeconfig', kubeconfig, '--yes']);
      expect(r.code, pattern).toBe(2);
      expect(r.stderr).toContain(`spec.safety.allowContexts[1]: ${JSON.stringify(pattern)} allows every context: name the one`);
      expect(r.stdout).not.toContain('preflight');
    }
  }, 60_000);

  it('run refuses a runbook with confirm steps when nobody can answer (no terminal, no --yes)', async () => {
    const r = await cli(['run', 'examples/confirm-step.yaml', '-i', inventory, '--kubeconfig', kubeconfig]);
    expect(r.code).toBe(3);
    expect(r.stdout).toContain('the runbook asks for confirmation, but there is no terminal and no --yes');
    noStack(r);
  });

  it('run refuses when the cluster does not answer, and never prints the token', async () => {
    const r = await runExample('--yes', '--report-dir', join(tmp, 'rep'));
    expect(r.code).toBe(3);
    expect(r.stdout).toMatch(/preflight FAIL cluster: apiserver https:\/\/127.0.0.1:9 does not answer/);
    expect(`${r.stdout}${r.stderr}`).not.toContain('not-a-real-token');
    noStack(r);
  });

  it('run without an inventory is a usage error (exit 2) that says how to give one', async () => {
    const r = await cli(['run', 'examples/guards-and-remediation.yaml']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('pass --inventory FILE or set KUBE_RUNBOOK_INVENTORY');
    noStack(r);
  });

  it('recover with nothing applied says so, and where it looked', async () => {
    const r = await cli(['recover']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`Nothing to recover: no run under ${join(tmp, 'state', 'runs')} has a fault still applied.`);
    const other = await cli(['recover', '--state-dir', join(tmp, 'elsewhere')]);
    expect(other.stdout).toContain(`no run under ${join(tmp, 'elsewhere', 'runs')}`);
  });

  it("recover --state-dir finds a run's journal there, and refuses a context its runbook does not allow", async () => {
    const runs = join(tmp, 'given', 'runs');
    mkdirSync(runs, { recursive: true });
    const marker = join(tmp, 'still-applied');
    writeFileSync(marker, '');
    const state = { node: 'here', apply: 'true', revert: `rm -f '${marker}'`, timeoutMs: 10_000 };
    const inv = inventoryOf({ layout: 'lab', transport: { type: 'local' }, nodes: [{ name: 'here', roles: ['worker'] }] }, 'x');
    const records = [
      {
        type: 'run',
        at: 1,
        runId: 'r-ctx',
        runbookFile: 'rb.yaml',
        runbookName: 'rb',
        inventoryFile: 'inv.yaml',
        inventory: inv,
        kubeconfig,
        context: 'lab',
        allowContexts: ['lab'],
        faultTtlMs: 60_000,
        pid: 1,
        host: 'elsewhere',
      },
      {
        type: 'prepared',
        at: 2,
        faultId: 'f01',
        action: 'run-command',
        node: 'here',
        step: '1 x',
        remediation: false,
        state,
        deadman: false,
      },
      { type: 'applied', at: 3, faultId: 'f01', state },
    ];
    writeFileSync(join(runs, 'r-ctx.jsonl'), records.map((x) => JSON.stringify(x)).join('\n') + '\n');
    const refused = await cli(['recover', '--state-dir', join(tmp, 'given'), '--context', 'production']);
    expect(refused.code).toBe(3);
    expect(refused.stderr).toContain(`context "production" is not in its runbook's spec.safety.allowContexts (lab)`);
    expect(existsSync(marker)).toBe(true);
    noStack(refused);
    const ok = await cli(['recover', '--state-dir', join(tmp, 'given')]);
    expect(ok.stdout).toContain(`Run r-ctx (rb, journal ${join(runs, 'r-ctx.jsonl')}): 1 fault(s) to revert`);
    expect(ok.stdout).toContain('all 1 reverted');
    expect(ok.code).toBe(0);
    expect(existsSync(marker)).toBe(false);
  });

  it('an unknown command or flag is a usage error (exit 2)', async () => {
    expect((await cli(['frobnicate'])).code).toBe(2);
    expect((await cli(['run', '--bogus'])).code).toBe(2);
  });
});
