import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Ran, root, runCli } from './helpers/cli.js';

const cli = (...args: string[]) => runCli(args);

const NO_SAFETY =
  'no spec.safety, so its defaults apply: allowContexts is empty, so every context is refused (run and preflight refuse to start); ' +
  'maxDuration 30m, faultTtl 10m, remediationTtl 1h, maxUnavailable 1 control-plane node and 50% of the worker nodes faulted at once, ' +
  'lockNamespace kube-system; add spec.safety to choose them';

const noStack = (r: Ran) => {
  expect(r.stdout).not.toContain('    at ');
  expect(r.stderr).not.toContain('    at ');
};

async function yamlFiles(dir: string): Promise<string[]> {
  if (!existsSync(join(root, dir))) return [];
  return (await readdir(join(root, dir), { recursive: true }))
    .filter((f) => /\.ya?ml$/.test(f))
    .sort()
    .map((f) => join(dir, f));
}

beforeAll(() => {
  if (!existsSync(join(root, 'dist/cli/main.js'))) throw new Error('dist/ is missing: run `npm run build` first');
});

describe('kube-runbook validate', () => {
  it('passes every file in runbooks/ and examples/', async () => {
    const files = [...(await yamlFiles('runbooks')), ...(await yamlFiles('examples'))];
    expect(files.length).toBeGreaterThanOrEqual(5);
    const r = await cli('validate', ...files);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const lines = r.stdout.trim().split('\n');
    expect(lines).toHaveLength(files.length);
    files.forEach((f, i) => expect(lines[i]).toMatch(new RegExp(`^ok ${f.replace(/[.]/g, '\\.')} \\((Runbook|Inventory) `)));
    expect(r.stdout).toContain('ok examples/parallel-steps.yaml (Runbook parallel-steps, 2 steps, 0 guards)');
    expect(r.stdout).toContain('ok examples/inventory-local.yaml (Inventory single-node-local, 1 node, layout kubeadm)');
  });

  it('searches a directory for YAML files', async () => {
    const r = await cli('validate', 'test/fixtures/valid');
    expect(r.code).toBe(0);
    expect(r.stdout.trim().split('\n')).toEqual([
      'ok test/fixtures/valid/full.yaml (Runbook full, 8 steps, 2 guards)',
      'ok test/fixtures/valid/inventory-lab.yaml (Inventory lab, 3 nodes, layout lab)',
      'ok test/fixtures/valid/json-style.yaml (Runbook json-style, 1 step, 0 guards)',
      'ok test/fixtures/valid/minimal.yaml (Runbook minimal, 1 step, 0 guards)',
      'ok test/fixtures/valid/tabs-in-script.yaml (Runbook tabs-in-script, 1 step, 0 guards)',
    ]);
  });

  const broken: [string, string][] = [
    ['typo-key.yaml', '6:3: spec.stepz: unknown key "stepz" (did you mean "steps"?)'],
    ['wrong-type.yaml', '5:9: metadata.tags: expected a list (got "game-day")'],
    ['unknown-action.yaml', '10:15: spec.steps[0].action: unknown action "run-comand" (did you mean "run-command"? known: '],
    ['bad-duration.yaml', '10:15: spec.steps[0].within: expected a duration such as 500ms, 10s, 5m or 1h (got "5 minutes")'],
    ['yaml-syntax.yaml', '7:16: YAML syntax error: this quoted text has no closing quote'],
    ['bad-indent.yaml', '8:4: YAML syntax error: '],
    [
      'over-indented-key.yaml',
      '8:9: YAML syntax error: "action" is indented deeper than "name" on the line before (column 9, not 7): keys of one mapping start at the same column',
    ],
    ['duplicate-key.yaml', '9:7: spec.steps[0].name: duplicate key "name" (first at 7:7)'],
    ['tabs.yaml', '7:1: tab character used for indentation (YAML allows only spaces)'],
    ['empty.yaml', '1:1: the file is empty; expected a Runbook or an Inventory'],
    ['comments-only.yaml', '1:1: the file is empty; expected a Runbook or an Inventory'],
    ['binary.yaml', '1:1: not a text file'],
    ['latin1.yaml', '1:1: not a text file'],
    ['list.yaml', '1:1: expected a mapping with apiVersion, kind, metadata, spec (got a list)'],
    ['prose.yaml', '1:1: expected a mapping with apiVersion, kind, metadata, spec (got "Stop the apiserver'],
    ['multi-doc.yaml', '6:1: a second YAML document starts here; a file holds exactly one'],
    ['bad-with.yaml', '9:9: spec.steps[0].with.aply: unknown key "aply" (did you mean "apply"?)'],
    [
      'steps-union.yaml',
      '7:7: spec.steps[0]: expected one of the keys action, expect, wait, confirm, revert, parallel; did you mean "action"?',
    ],
    [
      'bad-selector.yaml',
      '9:16: spec.steps[0].with.nodes: expected one of all, workers, control-plane; did you mean "workers"? (got "worker")',
    ],
    ['unknown-kind.yaml', '2:7: kind: unknown kind (expected one of Runbook, Inventory; did you mean "Runbook"?) (got "Runbok")'],
    ['revert-unknown.yaml', '11:15: spec.steps[2].revert: no earlier action step has this name'],
    ['bad-expressions.yaml', '8:98: spec.guards[0].with.condition: CEL: Unexpected token: EOF'],
    ['bad-inventory.yaml', '7:21: spec.transport.type: expected one of ssh, netns, local, agent; did you mean "ssh"? (got "sshh")'],
    [
      'token-over-http.yaml',
      '9:14: spec.guards[0].with.url: the token of bearerTokenFile goes only over https: use an https:// url, or set tokenOverHttp: true',
    ],
    [
      'inventory-token-over-http.yaml',
      '8:21: spec.prometheus.url: the token of bearerTokenFile goes only over https: use an https:// url, or set tokenOverHttp: true',
    ],
    ['remediation-ttl-given.yaml', '8:21: spec.safety.remediationTtl: remediationTtl (5m) must be longer than faultTtl (10m)'],
  ];

  it.each(broken)('%s: FILE:LINE:COL problems on stderr, exit 2, no stack trace', async (name, expected) => {
    const file = `test/fixtures/invalid/${name}`;
    const r = await cli('validate', file);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stdout).toBe('');
    noStack(r);
    const lines = r.stderr.trim().split('\n');
    expect(lines.at(-1)).toBe('1 of 1 file invalid');
    for (const line of lines.slice(0, -1)) expect(line).toMatch(new RegExp(`^${file.replace(/[.]/g, '\\.')}:\\d+:\\d+: `));
    expect(lines.some((l) => l.startsWith(`${file}:${expected}`))).toBe(true);
  });

  it('checks every file before failing, and says how many were invalid', async () => {
    const r = await cli(
      'validate',
      'examples/confirm-step.yaml',
      'test/fixtures/invalid/typo-key.yaml',
      'missing.yaml',
      'test/fixtures/valid/minimal.yaml',
    );
    expect(r.code).toBe(2);
    noStack(r);
    expect(r.stdout.trim().split('\n')).toEqual([
      'ok examples/confirm-step.yaml (Runbook confirm-step, 3 steps, 0 guards)',
      'ok test/fixtures/valid/minimal.yaml (Runbook minimal, 1 step, 0 guards)',
    ]);
    expect(r.stderr.trim().split('\n')).toEqual([
      'test/fixtures/invalid/typo-key.yaml:5:1: spec: missing required key "steps"',
      'test/fixtures/invalid/typo-key.yaml:6:3: spec.stepz: unknown key "stepz" (did you mean "steps"?)',
      'cannot read missing.yaml: no such file',
      `test/fixtures/valid/minimal.yaml:5:1: warning: spec: ${NO_SAFETY}`,
      '2 of 4 files invalid',
    ]);
  });

  it('an action parameter out of its range is refused where it stands, with the bad value', async () => {
    const file = 'test/fixtures/invalid/bad-starve-cpu.yaml';
    const r = await cli('validate', file);
    expect(r.code, r.stderr).toBe(2);
    noStack(r);
    expect(r.stderr.trim().split('\n')).toEqual([
      `${file}:8:41: spec.steps[0].with.quota: expected a percentage of one CPU from 1% to 100%, such as 10% (got "0%")`,
      `${file}:10:38: spec.steps[1].with.quota: expected a percentage of one CPU from 1% to 100%, such as 10% (got "150%")`,
      `${file}:12:25: spec.steps[2].with.component: expected one of apiserver, etcd, controller-manager, scheduler, kubelet (got "kube-proxy")`,
      '1 of 1 file invalid',
    ]);
  });

  it("load-apiserver: a qps above its bound, a ServiceAccount without namespace, a write to a user's object, nodes and from disagreeing, an existing account not opted in or in kube-system", async () => {
    const file = 'test/fixtures/invalid/bad-load-apiserver.yaml';
    const r = await cli('validate', file);
    expect(r.code, r.stderr).toBe(2);
    noStack(r);
    expect(r.stderr.trim().split('\n')).toEqual([
      `${file}:8:19: spec.steps[0].with.qps: expected a number <= 2000 (got 5000)`,
      `${file}:13:13: spec.steps[1].with.as: expected a ServiceAccount as namespace/name (got "prober")`,
      `${file}:15:60: spec.steps[1].with.requests[0].namespace: its own objects are in kr-load: leave namespace out (got "kube-system")`,
      `${file}:15:79: spec.steps[1].with.requests[0].name: patch reaches only the object the action creates: leave name out (got "kubeadm-config")`,
      `${file}:17:13: spec.steps[2].with: from: nodes needs nodes: the nodes to run it on (all, workers, {names: [...]}, ...)`,
      `${file}:19:21: spec.steps[3].with.nodes: nodes applies only with from: nodes (got from: executor)`,
      `${file}:21:41: spec.steps[4].with.nodes.role: expected one of control-plane, worker, etcd, load-balancer (got "wizard")`,
      `${file}:23:27: spec.steps[5].with.as: as impersonates an existing ServiceAccount: add identity: existing to mean it, or leave as out and the run creates the load's identity (got "team-a/prober")`,
      `${file}:25:47: spec.steps[6].with.as: never kube-system's ServiceAccounts: they run the cluster's controllers, and several may grant themselves anything (got "kube-system/clusterrole-aggregation-controller")`,
      '1 of 1 file invalid',
    ]);
  });

  it('--output json: one entry per file with positioned problems', async () => {
    const r = await cli(
      'validate',
      '--output',
      'json',
      'test/fixtures/invalid/bad-duration.yaml',
      'test/fixtures/valid/inventory-lab.yaml',
      'nope.yaml',
    );
    expect(r.code).toBe(2);
    noStack(r);
    const out = JSON.parse(r.stdout) as unknown;
    expect(out).toEqual([
      {
        file: 'test/fixtures/invalid/bad-duration.yaml',
        ok: false,
        kind: 'Runbook',
        problems: [
          { line: 7, col: 18, path: 'spec.safety.maxDuration', message: 'expected a duration such as 500ms, 10s, 5m or 1h (got "-5m")' },
          {
            line: 10,
            col: 15,
            path: 'spec.steps[0].within',
            message: 'expected a duration such as 500ms, 10s, 5m or 1h (got "5 minutes")',
          },
          { line: 11, col: 13, path: 'spec.steps[1].wait', message: 'expected a duration such as 500ms, 10s, 5m or 1h (got 10)' },
          { line: 13, col: 54, path: 'spec.steps[2].with.timeout', message: 'expected a duration such as 500ms, 10s, 5m or 1h (got "1d")' },
        ],
        warnings: [],
      },
      { file: 'test/fixtures/valid/inventory-lab.yaml', ok: true, kind: 'Inventory', problems: [], warnings: [] },
      {
        file: 'nope.yaml',
        ok: false,
        kind: null,
        problems: [{ line: null, col: null, path: '', message: 'cannot read nope.yaml: no such file' }],
        warnings: [],
      },
    ]);
  });

  it('CEL, PromQL and selector errors point inside the expression, whatever the YAML quoting (plain, double-quoted, folded)', async () => {
    const r = await cli('validate', '--output', 'json', 'test/fixtures/invalid/bad-expressions.yaml');
    expect(r.code).toBe(2);
    noStack(r);
    const [entry] = JSON.parse(r.stdout) as { problems: unknown[] }[];
    expect(entry?.problems).toEqual([
      { line: 8, col: 98, path: 'spec.guards[0].with.condition', message: 'CEL: Unexpected token: EOF' },
      { line: 14, col: 54, path: 'spec.guards[1].with.condition', message: 'CEL: Unknown variable: objet' },
      { line: 21, col: 40, path: 'spec.guards[2].with.condition', message: 'CEL: Unexpected character: &' },
      {
        line: 24,
        col: 58,
        path: 'spec.guards[3].with.selector',
        message: 'bad label selector "tier=frontend, bad key": "bad key" is not a label key',
      },
      { line: 28, col: 80, path: 'spec.guards[4].with.query', message: 'PromQL: syntax error at "q"' },
    ]);
  });

  it('a pattern RE2 does not take, and a condition over the cost limit, are refused where they stand', async () => {
    const r = await cli('validate', '--output', 'json', 'test/fixtures/invalid/bad-patterns.yaml');
    expect(r.code).toBe(2);
    noStack(r);
    const [entry] = JSON.parse(r.stdout) as { problems: { line: number; col: number; path: string; message: string }[] }[];
    expect(entry?.problems.map((p) => [p.line, p.col, p.path])).toEqual([
      [8, 82, 'spec.guards[0].with.condition'],
      [13, 21, 'spec.guards[1].with.condition'],
      [15, 59, 'spec.guards[2].with.bodyMatches'],
    ]);
    expect(entry?.problems[0]?.message).toMatch(/^CEL: matches\(\): not an RE2 regular expression: /);
    expect(entry?.problems[1]?.message).toBe(
      'CEL: the condition would cost at least 15,444,442, more than the limit of 1,000,000 (nested loops over large lists)',
    );
    expect(entry?.problems[2]?.message).toMatch(/^not an RE2 regular expression: /);
  });

  it('a directory without YAML files is a problem, not a silent pass', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'kr-validate-'));
    try {
      const r = await cli('validate', dir);
      expect(r.code).toBe(2);
      expect(r.stderr).toContain(`no .yaml or .yml files in ${dir}`);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('no file given: usage, exit 2', async () => {
    const r = await cli('validate');
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("missing required argument 'files'");
    noStack(r);
  });
});

describe('kube-runbook validate RUNBOOK INVENTORY: what plan and preflight would refuse, without a cluster', () => {
  const LAB = 'test/fixtures/valid/inventory-lab.yaml';
  const K3S = 'examples/inventory-k3s.yaml';
  const bad = (name: string) => `test/fixtures/invalid/${name}`;

  const pairs: [string, string, string][] = [
    [
      'pair-max-unavailable.yaml',
      LAB,
      `13:16: spec.steps[0].with.nodes: stop every kubelet: 2 of 2 worker nodes would be faulted at once (node-1, node-2), more than spec.safety.maxUnavailable.worker allows ("50%" = 1); narrow the steps' nodes, add a revert step, or raise the limit`,
    ],
    [
      'pair-unknown-node.yaml',
      LAB,
      '12:33: spec.steps[0].with.nodes.names[1]: node "node-9" is not in the inventory (known: cp-1, node-1, node-2)',
    ],
    [
      'pair-layout.yaml',
      K3S,
      '10:15: spec.steps[0].action: stop-etcd is refused on the inventory\'s layout "k3s": k3s embeds etcd in the `k3s` server process, so no member can stop alone; `stop-apiserver` stops the whole k3s server, its etcd member with it (it works on kubeadm, lab)',
    ],
    [
      'pair-context.yaml',
      K3S,
      '8:20: spec.safety.allowContexts: the inventory\'s context "default" is not in spec.safety.allowContexts ("staging-*", "prod@https://10.0.0.1:6443"); add it to spec.safety.allowContexts, or run with --context NAME',
    ],
  ];

  it.each(pairs)('%s against %s: FILE:LINE:COL, exit 2', async (name, inv, expected) => {
    const r = await cli('validate', bad(name), inv);
    expect(r.code, r.stderr).toBe(2);
    noStack(r);
    expect(r.stderr.trim().split('\n')).toEqual([`${bad(name)}:${expected}`, '1 of 2 files invalid']);
    expect(r.stdout.trim()).toBe(
      `ok ${inv} (${inv === LAB ? 'Inventory lab, 3 nodes, layout lab' : 'Inventory edge-k3s, 3 nodes, layout k3s'})`,
    );
  });

  it('each of those runbooks alone is valid: only the inventory makes them wrong', async () => {
    const r = await cli('validate', ...pairs.map(([name]) => bad(name)));
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
  });

  it('the inventory first, or given with -i: the same', async () => {
    const [name, inv, expected] = pairs[0]!;
    for (const args of [
      [inv, bad(name)],
      [bad(name), '-i', inv],
    ]) {
      const r = await cli('validate', ...args);
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toContain(`${bad(name)}:${expected}\n`);
    }
  });

  it('plan --offline refuses the same pair with the same lines', async () => {
    const [name, inv, expected] = pairs[2]!;
    const plan = await cli('plan', '--offline', bad(name), '-i', inv);
    expect(plan.code, plan.stderr).toBe(2);
    noStack(plan);
    expect(plan.stderr.trim().split('\n')).toEqual([`${bad(name)}:${expected}`]);
    expect(plan.stdout).toBe('');
  });

  it('plan --offline prints what preflight would refuse with the same lines, and still plans', async () => {
    const [name, inv, expected] = pairs[3]!;
    const plan = await cli('plan', '--offline', bad(name), '-i', inv);
    expect(plan.code, plan.stderr).toBe(0);
    expect(plan.stderr.trim().split('\n')).toEqual([`${bad(name)}:${expected}`]);
    expect(plan.stdout).toContain('Planned offline');
  });

  it('a file of the other kind gets one line saying so, not the schema errors of the kind expected', async () => {
    const inv = 'test/fixtures/valid/inventory-lab.yaml';
    const rb = 'examples/revert-step.yaml';
    const asRunbook = await cli('validate', inv, '-i', inv);
    expect(asRunbook.code).toBe(2);
    noStack(asRunbook);
    expect(asRunbook.stderr.trim().split('\n')).toEqual([`${inv}:1:1: this is an Inventory; expected a Runbook`, '1 of 2 files invalid']);
    const asInventory = await cli('validate', rb, '-i', rb);
    expect(asInventory.code).toBe(2);
    expect(asInventory.stderr.trim().split('\n')).toEqual([`${rb}:1:1: this is a Runbook; expected an Inventory`, '1 of 2 files invalid']);
  });

  it('plan given an inventory as its runbook: the same one line', async () => {
    const inv = 'test/fixtures/valid/inventory-lab.yaml';
    const r = await cli('plan', '--offline', inv, '-i', inv);
    expect(r.code, r.stderr).toBe(2);
    noStack(r);
    expect(r.stderr.trim().split('\n')).toEqual([
      `kube-runbook: ${inv}: 1 problem [RUNBOOK_INVALID]`,
      `${inv}:1:1: this is an Inventory; expected a Runbook`,
    ]);
  });

  it('a runbook without spec.safety: a warning naming the defaults that apply, exit 0', async () => {
    const file = 'test/fixtures/valid/minimal.yaml';
    const r = await cli('validate', file, LAB);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr.trim().split('\n')).toEqual([`${file}:5:1: warning: spec: ${NO_SAFETY}`]);
  });
});

describe('kube-runbook schema', () => {
  const dirs: string[] = [];
  afterAll(async () => Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true }))));

  it('prints the runbook schema, or the inventory one', async () => {
    const r = await cli('schema');
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(await readFile(join(root, 'schema/runbook.schema.json'), 'utf8'));
    const inv = await cli('schema', 'inventory');
    expect(JSON.parse(inv.stdout)).toMatchObject({ title: 'kube-runbook Inventory', properties: { kind: { const: 'Inventory' } } });
  });

  it('--write writes every schema file, as committed', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'kr-schema-'));
    dirs.push(dir);
    const r = await cli('schema', '--write', '--out-dir', dir);
    expect(r.code).toBe(0);
    const names = ['runbook.schema.json', 'inventory.schema.json', 'plan.schema.json', 'report.schema.json'];
    expect(r.stdout).toBe(names.map((name) => `wrote ${join(dir, name)}\n`).join(''));
    for (const name of names) expect(await readFile(join(dir, name), 'utf8')).toBe(await readFile(join(root, 'schema', name), 'utf8'));
  });
});
