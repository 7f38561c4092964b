import { RUN_STATUS } from '../engine/events.js';
import type { RunReport } from './collect.js';
import { onAttempt } from './attempts.js';
import { escapeMarkup as esc } from './markup.js';

const seconds = (from?: string, to?: string) => (from && to ? ((Date.parse(to) - Date.parse(from)) / 1000).toFixed(3) : '0');

/**
 * What each run status is in JUnit: `failure` where the cluster did not hold up (a step failed, a guard aborted, an
 * objective was missed, a fault stayed applied), `error` where the run could not be carried out (refused before any
 * fault, halted, interrupted, or never ended), nothing where it passed (exit 0). The README's JUnit section has the table.
 */
export const JUNIT_OUTCOME: Record<RunReport['status'], 'pass' | 'failure' | 'error'> = {
  passed: 'pass',
  failed: 'failure',
  aborted: 'failure',
  'rollback-incomplete': 'failure',
  'objective-missed': 'failure',
  refused: 'error',
  halted: 'error',
  interrupted: 'error',
  running: 'error',
};

const prop = (name: string, value: string) => `<property name="${esc(name)}" value="${esc(value)}"/>`;
const fault = (f: { action: string; node?: string }) => `${f.action}${f.node ? ` on ${f.node}` : ''}`;

/** The run as a whole: passes exactly when its exit code is 0, so a CI's red and the exit code always agree. */
function outcomeCase(r: RunReport): string {
  const exit = r.status === 'running' ? undefined : RUN_STATUS[r.status];
  const attrs = `classname="${esc(r.runbook)}.run" name="outcome" time="${((r.durationMs ?? 0) / 1000).toFixed(3)}"`;
  const props = `<properties>${prop('status', r.status)}${prop('exitCode', exit === undefined ? 'none' : String(exit))}</properties>`;
  const refusedBy = r.preflight.filter((p) => !p.ok).map((p) => `preflight ${p.check}: ${p.detail}`);
  const body = esc([r.reason, ...(r.status === 'refused' ? refusedBy : [])].join('\n'));
  const message = esc(exit === undefined ? 'the run did not end (no run-end in the report)' : `${r.status} (exit ${exit})`);
  const outcome = JUNIT_OUTCOME[r.status];
  if (outcome === 'pass') return `    <testcase ${attrs}>${props}<system-out>${body}</system-out></testcase>`;
  return `    <testcase ${attrs}>${props}<${outcome} message="${message}">${body}</${outcome}></testcase>`;
}

/**
 * A guard's firing. `abort` fails the run (its case fails); `remediate` and `warn` are the guard doing its job: a
 * passing case that says what fired and when, and for `remediate` what was applied and when it was undone.
 */
function firingCase(r: RunReport, g: RunReport['guardFirings'][number]): string {
  const attrs = `classname="${esc(r.runbook)}.guards" name="${esc(`${g.guard} at ${g.at}`)}"`;
  const applied = g.response === 'remediate' ? r.faults.filter((f) => f.remediation) : [];
  const props = [
    prop('guard', g.guard),
    prop('response', g.response),
    prop('firedAt', g.at),
    ...applied.flatMap((f, i) => [
      prop(`remediation.${i + 1}`, fault(f)),
      prop(`remediation.${i + 1}.appliedAt`, f.appliedAt ?? 'not applied'),
      prop(`remediation.${i + 1}.undoneAt`, f.revertedAt ?? (f.status === 'revert-failed' ? 'undo failed' : 'not undone')),
    ]),
  ].join('');
  const lines = [
    `guard ${g.guard} fired ${g.response} at ${g.at}: ${g.detail}`,
    ...applied.map(
      (f) =>
        `remediation ${fault(f)}: ${f.appliedAt ? `applied at ${f.appliedAt}` : `not applied${f.error ? ` (${f.error})` : ''}`}, ` +
        (f.revertedAt ? `undone at ${f.revertedAt}` : f.status === 'revert-failed' ? `undo failed: ${f.error ?? ''}` : 'not undone'),
    ),
  ];
  const failed = g.response === 'abort' && r.status !== 'passed';
  return `    <testcase ${attrs}><properties>${props}</properties>${
    failed ? `<failure message="abort">${esc(g.detail)}</failure>` : `<system-out>${esc(lines.join('\n'))}</system-out>`
  }</testcase>`;
}

/**
 * JUnit XML for CI: one test case for the run's outcome, one per step, one per guard that aborted, remediated or
 * warned, one per recovery objective, one for the rollback. Failures and errors appear only when the exit code is not 0.
 */
export function renderJUnit(r: RunReport): string {
  const cases: string[] = [outcomeCase(r)];
  for (const s of r.steps) {
    const attrs = `classname="${esc(r.runbook)}.steps" name="${esc(`${s.index}. ${s.name}`)}" time="${seconds(s.startedAt, s.endedAt)}"`;
    if (s.status === 'passed') cases.push(`    <testcase ${attrs}/>`);
    else if (s.status === 'skipped') cases.push(`    <testcase ${attrs}><skipped/></testcase>`);
    else if (s.status === undefined)
      cases.push(`    <testcase ${attrs}><error message="unfinished">${esc(s.detail ?? 'the step did not end')}</error></testcase>`);
    else cases.push(`    <testcase ${attrs}><failure message="${esc(s.status)}">${esc(s.detail ?? '')}</failure></testcase>`);
  }
  for (const g of r.guardFirings.filter((x) => ['abort', 'remediate', 'warn'].includes(x.response))) cases.push(firingCase(r, g));
  for (const o of r.objectives ?? []) {
    const attrs = `classname="${esc(r.runbook)}.objectives" name="${esc(o.name)}" time="${((o.recoveryMs ?? 0) / 1000).toFixed(3)}"`;
    if (o.status === 'met') cases.push(`    <testcase ${attrs}><system-out>${esc(o.detail)}</system-out></testcase>`);
    else if (o.status === 'missed')
      cases.push(`    <testcase ${attrs}><failure message="objective missed">${esc(o.detail)}</failure></testcase>`);
    else cases.push(`    <testcase ${attrs}><skipped message="${esc(o.detail)}"/></testcase>`);
  }
  const rb = `classname="${esc(r.runbook)}.rollback" name="every fault reverted"`;
  // reverts that needed more than one attempt, and failed ones with their attempts, as CI shows them
  const tries = r.faults
    .filter((f) => (f.attempts ?? 1) > 1)
    .map((f) => `${fault(f)} ${f.status === 'reverted' ? 'reverted' : 'not reverted'} ${onAttempt(f.attempts, f.retried)}`);
  const out = tries.length ? `<system-out>${esc(tries.join('\n'))}</system-out>` : '';
  cases.push(
    r.remaining.length
      ? `    <testcase ${rb}><failure message="rollback incomplete">${esc(r.remaining.map(fault).join('\n'))}${r.recoverCommand ? esc(`\n${r.recoverCommand}`) : ''}</failure>${out}</testcase>`
      : out
        ? `    <testcase ${rb}>${out}</testcase>`
        : `    <testcase ${rb}/>`,
  );
  const count = (tag: string) => cases.filter((c) => c.includes(`<${tag} `) || c.includes(`<${tag}/>`)).length;
  const totals = `tests="${cases.length}" failures="${count('failure')}" errors="${count('error')}" skipped="${count('skipped')}"`;
  return `<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="kube-runbook" ${totals}>
  <testsuite name="${esc(r.runbook)}" ${totals} timestamp="${esc(r.startedAt)}" time="${((r.durationMs ?? 0) / 1000).toFixed(3)}">
    <properties><property name="runId" value="${esc(r.runId)}"/><property name="status" value="${esc(r.status)}"/><property name="reason" value="${esc(r.reason)}"/></properties>
${cases.join('\n')}
  </testsuite>
</testsuites>
`;
}
