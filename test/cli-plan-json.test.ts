import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Ajv } from 'ajv';
import formats from 'ajv-formats';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { parse } from 'yaml';
import { formatDuration } from '../src/core/duration.js';
import { runCli } from '../src/cli/main.js';
import { out } from '../src/cli/output.js';
import type { PlanJson } from '../src/report/plan-schema.js';

/** The shipped runbooks a lab inventory plans offline (the others need the cluster's labels or real nodes). */
const PLANNED: [string, string][] = [
  ...[
    'confirm-step',
    'guards-and-remediation',
    'kubernetes-object',
    'parallel-steps',
    'promql',
    'revert-step',
    'scheduler-outage',
    'workload-availability',
  ].map((n): [string, string] => [`examples/${n}.yaml`, 'examples/inventory-lab.yaml']),
  ['examples/control-plane-overload-ha.yaml', 'examples/inventory-lab-ha.yaml'],
  ...[
    'apiserver-outage',
    'control-plane-member-loss',
    'endpoints-watch',
    'etcd-member-loss',
    'etcd-slow-disk',
    'heartbeat-audit',
    'kubelet-partition',
    'emergency/control-plane-failover',
    'emergency/freeze-evictions',
    'emergency/shed-apiserver-load',
  ].map((n): [string, string] => [`runbooks/${n}.yaml`, 'examples/inventory-lab.yaml']),
  // its HAProxy is a node of role load-balancer: a lab of several control planes has one
  ['runbooks/load-balancer-outage.yaml', 'examples/inventory-lab-ha.yaml'],
];

let printed: string[] = [];
beforeEach(() => {
  printed = [];
  vi.spyOn(out, 'stdout').mockImplementation((t: string) => printed.push(t.endsWith('\n') ? t : `${t}\n`) > 0);
  vi.stubEnv('KUBE_RUNBOOK_INVENTORY', '');
});
afterEach(() => {
  vi.restoreAllMocks();
  vi.unstubAllEnvs();
});

/** `kube-runbook plan --offline ARGS` in this process: its exit code and what it printed. */
async function plan(...args: string[]): Promise<string> {
  printed = [];
  const code = await runCli(['node', 'kube-runbook', 'plan', '--offline', ...args]);
  expect(code, printed.join('')).toBe(0);
  return printed.join('');
}

type Step = PlanJson['steps'][number];
const flat = (steps: readonly Step[]): Step[] => steps.flatMap((s): Step[] => (s.kind === 'parallel' ? [s, ...s.children] : [s]));
const where = (targets: readonly string[] | null) => (targets ? ` on ${targets.join(', ') || '(no node matches)'}` : ' (cluster)');

/**
 * Walks the text plan section by section and finds each thing it says in the JSON plan. A section the walk does not
 * know fails it: a new section of the text plan needs its JSON counterpart (and this walk) first.
 */
function expectParity(text: string, json: PlanJson): void {
  const lines = text.trimEnd().split('\n');
  const sections: [string, string[]][] = [];
  let head = lines.findIndex((l) => l === '');
  // the header: runbook, its description, inventory, safety
  const header = lines.slice(0, head);
  expect(header[0]).toBe(`Runbook ${json.runbook} (${json.file})`);
  if (json.description) expect(header[1]).toBe(`  ${json.description}`);
  const inv = json.inventory;
  expect(header).toContain(`Inventory ${inv.name}: layout ${inv.layout}, ${inv.nodes.length} nodes (${inv.nodes.join(', ')})`);
  const safety = header.find((l) => l.startsWith('Safety: '));
  expect(safety).toBe(
    `Safety: contexts ${json.safety.allowContexts.join(', ') || '(none allowed)'}; max duration ${formatDuration(json.safety.maxDurationMs)}; ` +
      `node-side dead-man after ${formatDuration(json.safety.faultTtlMs)} without keepalive`,
  );
  expect(header.length).toBe(json.description ? 4 : 3);
  while (head < lines.length) {
    const body: string[] = [];
    let i = head + 2;
    while (i < lines.length && lines[i] !== '' && lines[i]!.startsWith('  ')) body.push(lines[i++]!);
    sections.push([lines[head + 1]!, body]);
    head = i;
    if (lines[i] !== '') break;
  }
  const none = (body: string[]) => body.length === 1 && body[0] === '  (none)';
  const seen: string[] = [];
  for (const [title, body] of sections) {
    const name = title.replace(/ \(.*$|:$/, '');
    seen.push(name);
    switch (name) {
      case 'Guards':
        if (none(body)) expect(json.guards).toEqual([]);
        else
          expect(body.map((l) => l.match(/^ {2}- (.*?): (\S+?)[ ;].*violated → (\w+); unknown → (\w+)/)?.slice(1))).toEqual(
            json.guards.map((g) => [g.name, g.probe, g.onViolation, g.onUnknown]),
          );
        break;
      case 'Steps': {
        const steps = flat(json.steps);
        const stepLines = body.filter((l) => /^ {2}(?: {3})?\d[\d.]*\. /.test(l));
        expect(stepLines.length).toBe(steps.length);
        steps.forEach((s, k) => {
          const l = stepLines[k]!.trim();
          expect(l === `${s.index}. ${s.name}` || l.startsWith(`${s.index}. ${s.name} — `), `${l} is step ${s.index}. ${s.name}`).toBe(
            true,
          );
          if (s.kind === 'action') {
            expect(l).toContain(` — ${s.action}${where(s.targets)}`);
            const after = body[body.indexOf(stepLines[k]!) + 1] ?? '';
            const indent = (x: string) => x.length - x.trimStart().length;
            const said =
              indent(after) > indent(stepLines[k]!) && !/^\d[\d.]*\. |^\(/.test(after.trim()) && after.trim() !== s.undoneThroughAgents;
            expect(said ? after.trim() : null).toBe(s.describe);
            if (s.orElse) expect(body.join('\n')).toContain(`(or ${s.orElse}, where the server is too old for ${s.action}`);
            if (s.undoneThroughAgents) expect(body.join('\n')).toContain(s.undoneThroughAgents);
          }
          if (s.kind === 'expect') expect(l).toContain(`expect ${s.probe}`);
          if (s.kind === 'expect') expect(l).toContain(`to read ${s.status} within ${formatDuration(s.withinMs)}`);
          if (s.kind === 'wait') expect(l).toContain(`wait ${formatDuration(s.ms)}`);
          if (s.kind === 'confirm') expect(l).toContain(`ask "${s.message}" (timeout ${formatDuration(s.timeoutMs)}, then ${s.onTimeout})`);
          if (s.kind === 'revert') expect(l).toContain(`revert step ${s.target.index} (${s.target.action}${where(s.target.targets)}) now`);
        });
        expect(body.filter((l) => l.startsWith('  warning: ')).map((l) => l.slice(11).replace(/ \(preflight refuses this\)$/, ''))).toEqual(
          json.warnings,
        );
        break;
      }
      case 'Remediation':
        if (none(body)) expect(json.remediation).toEqual([]);
        else
          expect(body.filter((l) => /^ {2}\S/.test(l)).map((l) => l.trim())).toEqual(
            json.remediation.map((r) => expect.stringMatching(new RegExp(`^${r.index}\\. ${r.action}${escape(where(r.targets))}( |$)`))),
          );
        for (const r of json.remediation) if (r.orElse) expect(body.join('\n')).toContain(`(or ${r.orElse}, where`);
        break;
      case 'Rollback':
        if (json.rollback.order.length === 0) expect(body).toEqual(['  (nothing to revert: the runbook only observes)']);
        else
          expect(body.map((l) => l.replace(/^ {2}\d+\. /, ''))).toEqual(
            json.rollback.order.map((e) =>
              expect.stringMatching(
                new RegExp(
                  e.kind === 'wait'
                    ? `^wait until ${e.probe}\\b.* reads ok \\(at most ${formatDuration(e.withinMs)};`
                    : e.kind === 'undo-remediation'
                      ? `^undo remediation ${e.index} if it was applied: ${e.action}${escape(where(e.targets))}$`
                      : `^revert step ${e.step}: ${e.action}${escape(where(e.targets))}${e.unlessRevertedEarly ? ' \\(if the revert step did not already\\)' : ''}$`,
                ),
              ),
            ),
          );
        break;
      case 'Recovery objectives':
        expect(body.map((l) => l.match(/^ {2}- (.*?): from .* until (\S+?)[ {].* for (\S+); objective (\S+)$/)?.slice(1))).toEqual(
          json.objectives.map((o) => [o.name, o.probe, formatDuration(o.holdForMs), formatDuration(o.withinMs)]),
        );
        break;
      case 'Sensitive permissions the run needs':
        expect(body).toEqual(json.sensitiveGrants.map((g) => `  - ${g.grant}: ${g.why}`));
        break;
      default:
        expect.fail(`the text plan has a section "${title}" the JSON plan is not checked for`);
    }
  }
  if (json.objectives.length) expect(seen).toContain('Recovery objectives');
  if (json.sensitiveGrants.length) expect(seen).toContain('Sensitive permissions the run needs');
  expect(seen.slice(0, 4)).toEqual(['Guards', 'Steps', 'Remediation', 'Rollback']);
}

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

describe('plan -o json', () => {
  const ajv = new Ajv({ allErrors: true, strict: false });
  formats.default(ajv);
  const validate = ajv.compile(JSON.parse(readFileSync(new URL('../schema/plan.schema.json', import.meta.url), 'utf8')));

  it.each(PLANNED)('%s: says all the text plan says, in the shape of schema/plan.schema.json, the same in yaml', async (file, inv) => {
    const text = await plan(file, '-i', inv);
    const json = JSON.parse(await plan(file, '-i', inv, '-o', 'json')) as PlanJson;
    expect(validate(json), JSON.stringify(validate.errors)).toBe(true);
    expectParity(text, json);
    expect(parse(await plan(file, '-i', inv, '-o', 'yaml'))).toEqual(json);
  });

  it('says what the load identity is granted, and what remediation falls back to', async () => {
    const ha = JSON.parse(
      await plan('examples/control-plane-overload-ha.yaml', '-i', 'examples/inventory-lab-ha.yaml', '-o', 'json'),
    ) as PlanJson;
    const load = flat(ha.steps).find((s) => s.kind === 'action' && s.action === 'load-apiserver');
    expect(load).toMatchObject({
      targets: null,
      describe: expect.stringMatching(
        /as a ServiceAccount the run creates and removes, kr-load\/kube-runbook-load-\w+, that may only list pods \(cluster-wide\)/,
      ),
      access: expect.arrayContaining([{ apiGroup: '', resource: 'pods', verbs: ['list'] }]),
    });
    const outage = JSON.parse(await plan('runbooks/apiserver-outage.yaml', '-i', 'examples/inventory-lab.yaml', '-o', 'json')) as PlanJson;
    expect(outage.remediation).toEqual([
      expect.objectContaining({ index: 'R1', action: 'disable-taint-eviction', targets: ['cp-1'], orElse: 'stop-controller-manager' }),
    ]);
    expect(outage.rollback.order.map((e) => e.kind)).toEqual(['revert', 'revert', 'wait', 'undo-remediation']);
    expect(outage.safety).toMatchObject({ remediationTtlMs: expect.any(Number), maxUnavailable: expect.any(Object) });
  });

  it('says no password of a URL, in json or in text', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kr-plan-json-'));
    try {
      const file = join(dir, 'promql.yaml');
      writeFileSync(file, readFileSync('examples/promql.yaml', 'utf8').replaceAll('http://prometheus', 'http://kr:hunter2@prometheus'));
      for (const o of [[], ['-o', 'json'], ['-o', 'yaml']]) {
        const said = await plan(file, '-i', 'examples/inventory-lab.yaml', ...o);
        expect(said).toContain('http://kr:[redacted]@prometheus.monitoring:9090');
        expect(said).not.toContain('hunter2');
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses a plan of a newer version, and a step of no known kind', () => {
    const base = {
      planVersion: 1,
      runbook: 'r',
      file: 'f',
      description: null,
      inventory: { name: 'i', layout: 'lab', nodes: [] },
      context: null,
    };
    const ok = {
      ...base,
      offline: true,
      safety: {
        allowContexts: [],
        maxDurationMs: 1,
        faultTtlMs: 1,
        remediationTtlMs: 1,
        lockNamespace: 'kube-system',
        maxUnavailable: { controlPlane: 1, worker: '50%' },
      },
      guards: [],
      steps: [{ kind: 'wait', index: '1', name: 'w', ms: 1 }],
      warnings: [],
      remediation: [],
      rollback: { order: [] },
      objectives: [],
      sensitiveGrants: [],
    };
    expect(validate(ok), JSON.stringify(validate.errors)).toBe(true);
    expect(validate({ ...ok, planVersion: 2 })).toBe(false);
    expect(validate({ ...ok, steps: [{ kind: 'sleep', index: '1', name: 'w', ms: 1 }] })).toBe(false);
  });
});
