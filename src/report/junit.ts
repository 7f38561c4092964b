import type { RunReport } from './collect.js';
import { onAttempt } from './attempts.js';
import { escapeMarkup as esc } from './markup.js';

const seconds = (from?: string, to?: string) => (from && to ? ((Date.parse(to) - Date.parse(from)) / 1000).toFixed(3) : '0');

/** JUnit XML for CI: one test case per step, one per guard that fired, one per recovery objective, one for the rollback. */
export function renderJUnit(r: RunReport): string {
  const cases: string[] = [];
  for (const s of r.steps) {
    const attrs = `classname="${esc(r.runbook)}.steps" name="${esc(`${s.index}. ${s.name}`)}" time="${seconds(s.startedAt, s.endedAt)}"`;
    if (s.status === 'passed') cases.push(`    <testcase ${attrs}/>`);
    else if (s.status === 'skipped') cases.push(`    <testcase ${attrs}><skipped/></testcase>`);
    else
      cases.push(`    <testcase ${attrs}><failure message="${esc(s.status ?? 'unfinished')}">${esc(s.detail ?? '')}</failure></testcase>`);
  }
  for (const g of r.guardFirings.filter((x) => x.response === 'abort' || x.response === 'remediate'))
    cases.push(
      `    <testcase classname="${esc(r.runbook)}.guards" name="${esc(`${g.guard} at ${g.at}`)}"><failure message="${esc(g.response)}">${esc(g.detail)}</failure></testcase>`,
    );
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
    .map(
      (f) =>
        `${f.action}${f.node ? ` on ${f.node}` : ''} ${f.status === 'reverted' ? 'reverted' : 'not reverted'} ${onAttempt(f.attempts, f.retried)}`,
    );
  const out = tries.length ? `<system-out>${esc(tries.join('\n'))}</system-out>` : '';
  cases.push(
    r.remaining.length
      ? `    <testcase ${rb}><failure message="rollback incomplete">${esc(r.remaining.map((f) => `${f.action}${f.node ? ` on ${f.node}` : ''}`).join('\n'))}${r.recoverCommand ? esc(`\n${r.recoverCommand}`) : ''}</failure>${out}</testcase>`
      : out
        ? `    <testcase ${rb}>${out}</testcase>`
        : `    <testcase ${rb}/>`,
  );
  const failures = cases.filter((c) => c.includes('<failure')).length;
  return `<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="kube-runbook" tests="${cases.length}" failures="${failures}">
  <testsuite name="${esc(r.runbook)}" tests="${cases.length}" failures="${failures}" timestamp="${esc(r.startedAt)}" time="${((r.durationMs ?? 0) / 1000).toFixed(3)}">
    <properties><property name="runId" value="${esc(r.runId)}"/><property name="status" value="${esc(r.status)}"/><property name="reason" value="${esc(r.reason)}"/></properties>
${cases.join('\n')}
  </testsuite>
</testsuites>
`;
}
