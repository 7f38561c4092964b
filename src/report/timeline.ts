import { formatDuration } from '../core/duration.js';
import type { FaultRef } from '../engine/events.js';
import type { FaultRecord, ObjectiveRecord, Observation, PredictedEviction, RunReport } from './collect.js';
import { attemptLine, onAttempt } from './attempts.js';
import { type Axis, chartSvg, clock, fitLabel, grid, ms, noDataBar, xOf } from './axis.js';
import { renderCurves } from './curves.js';
import { classToken, joinMarkup, markup, type Markup, type MarkupValue } from './markup.js';
import { renderNodeLanes } from './node-lanes.js';
import { legend, paint, paletteCss } from './palette.js';

/** A bar on a lane, from one time to another; `cls` picks its colour. */
interface Span {
  from: number;
  to: number;
  cls: string;
  title: string;
}
/** A point in time on a lane: a guard firing, a pod deleted, a predicted eviction. */
interface Mark {
  at: number;
  cls: string;
  title: string;
}
interface Lane {
  label: string;
  spans: Span[];
  marks: Mark[];
}
interface Group {
  title: string;
  lanes: Lane[];
}

const ROW_H = 22;
const AXIS_H = 24;

/** When something ended, or the end of the run while it had not. */
const endOr = (iso: string | undefined, end: number) => (Number.isFinite(ms(iso)) ? ms(iso) : end);
/** The pods an observer saw deleted (the `deleted` facts of its latest reading), if its probe tells of them. */
const deletionsOf = (o: Observation) => o.deleted;

/**
 * The run as a self-contained HTML page (no scripts, nothing fetched): one lane per step, fault, guard and
 * observer on a common time axis; on the same axis a lane per node (Lease age, Ready, NoExecute taint, pods
 * deleted) and the values probes read; then the tables a game-day review reads — what remains applied first.
 */
export function renderTimeline(r: RunReport): string {
  const start = ms(r.startedAt);
  const end = endOr(r.endedAt, lastTime(r, start));
  const groups = lanes(r, end);
  // predictions past the end stay visible (what the guard prevented), within twice the run's length
  const cap = start + Math.max(2 * (end - start), 1000);
  const latest = Math.max(end, ...groups.flatMap((g) => g.lanes.flatMap((l) => l.marks.map((m) => m.at))).filter((t) => t <= cap));
  const axis: Axis = { start, span: Math.max(latest - start, 1), end };
  return page(r, joinMarkup([svg(groups, axis), renderNodeLanes(r, axis), renderCurves(r, axis)], '\n'), tables(r)).toString();
}

/** A guard's status changes, in order. */
const transitionsOf = (r: RunReport, guard: string) => r.guardTransitions.filter((g) => g.guard === guard);

/**
 * The eviction a reading's probe predicted (its `eviction` fact), as `[when the eviction is predicted, what the mark
 * says]`, or nothing for a reading without one.
 */
function prediction(h: { at: string; eviction?: PredictedEviction }): [number, string] | undefined {
  const e = h.eviction;
  return e ? [ms(e.at), `predicted at ${clock(ms(h.at))}: ${e.pod} on ${e.node} evicted at ${clock(ms(e.at))}`] : undefined;
}

function lastTime(r: RunReport, start: number): number {
  const times = [
    ...r.steps.flatMap((s) => [s.startedAt, s.endedAt]),
    ...r.faults.flatMap((f) => [f.appliedAt, f.revertedAt]),
    ...r.guardTransitions.map((g) => g.at),
    ...(r.objectives ?? []).map((o) => o.endedAt),
  ]
    .map(ms)
    .filter(Number.isFinite);
  return Math.max(start + 1, ...times);
}

function lanes(r: RunReport, end: number): Group[] {
  const steps: Lane[] = r.steps.map((s) => ({
    label: `${s.index}. ${s.name}`,
    spans: [
      {
        from: ms(s.startedAt),
        to: endOr(s.endedAt, end),
        cls: paint('step', s.status ?? 'running', 'step-running'),
        title: `${s.kind}: ${s.status ?? 'unfinished'}${s.detail ? ` — ${s.detail}` : ''}`,
      },
    ],
    marks: [],
  }));
  if (r.rollback) {
    const rb = r.rollback;
    const cls = rb.complete === false ? 'rollback-incomplete' : 'rollback';
    steps.push({
      label: 'rollback',
      spans: [{ from: ms(rb.startedAt), to: endOr(rb.endedAt, end), cls, title: `rollback: ${rb.reason}` }],
      marks: [],
    });
  }
  const faults: Lane[] = r.faults.map((f) => {
    const bar = faultBar(f, end);
    const tries = r.attempts
      .filter((a) => a.faultId === f.faultId)
      .map((a) => ({ at: ms(a.at), cls: 'attempt', title: `${clock(ms(a.at))} ${attemptLine(a)}` }));
    return { label: faultLabel(f), spans: bar.spans, marks: [...bar.marks, ...tries] };
  });
  const guardNames = [...new Set([...r.guardTransitions.map((g) => g.guard), ...r.guardFirings.map((g) => g.guard)])];
  const guards: Lane[] = guardNames.map((name) => ({
    label: name,
    spans: readingSpans(transitionsOf(r, name), end),
    marks: r.guardFirings
      .filter((g) => g.guard === name)
      .map((g) => ({
        at: ms(g.at),
        cls: paint('fired', g.response, 'fired-other'),
        title: `${clock(ms(g.at))} fired → ${g.response}: ${g.detail}`,
      })),
  }));
  // An observer a guard shares its name with (the eviction forecast) is a second reading of the same probe with the
  // run's own parameters (a margin of 0 s where the guard's may be 20 s), whose unknown readings the report does not
  // keep: its verdicts would contradict the guard's at the same moment. Its row shows the guard's verdicts, every
  // change of them, beside the predictions both read.
  const observers: Lane[] = Object.entries(r.observations).map(([name, o]) => {
    const obs = o as Observation;
    const history = obs.history ?? [];
    if (!guardNames.includes(name)) return { label: name, spans: readingSpans(history, end), marks: observationMarks(obs, history) };
    const readings = [...history, ...(r.guardReadings[name] ?? [])];
    return {
      label: `${name} (as guarded)`,
      spans: readingSpans(transitionsOf(r, name), end, 'guard'),
      marks: observationMarks(obs, readings),
    };
  });
  // each objective: its allowance (from the clock's start, `within` long), the clock until it stopped, the recovery
  const objectives: Lane[] = (r.objectives ?? [])
    .filter((o) => o.startedAt)
    .map((o) => {
      const from = ms(o.startedAt);
      const recovered =
        o.recoveryMs === undefined
          ? []
          : [{ at: from + o.recoveryMs, cls: 'recovered', title: `recovered after ${formatDuration(o.recoveryMs)}` }];
      return {
        label: o.name,
        spans: [
          { from, to: from + o.withinMs, cls: 'objective-window', title: `objective: within ${formatDuration(o.withinMs)}` },
          { from, to: endOr(o.endedAt, end), cls: `objective-${o.status}`, title: `${o.status}: ${o.detail}` },
        ],
        marks: recovered,
      };
    });
  return [
    { title: 'Steps', lanes: steps },
    { title: 'Faults and remediations', lanes: faults },
    { title: 'Guards', lanes: guards },
    { title: 'Observed', lanes: observers },
    { title: 'Recovery objectives', lanes: objectives },
  ].filter((g) => g.lanes.length > 0);
}

const faultLabel = (f: FaultRef) => `${f.action}${f.node ? ` on ${f.node}` : ''}${f.remediation ? ' (remediation)' : ''}`;

function faultBar(f: FaultRecord, end: number): Pick<Lane, 'spans' | 'marks'> {
  const applied = ms(f.appliedAt);
  if (!Number.isFinite(applied))
    return { spans: [], marks: [{ at: endOr(f.revertedAt, end), cls: 'fault-failed', title: `${f.status}: ${f.error ?? ''}` }] };
  const reverted = f.status === 'reverted' && Number.isFinite(ms(f.revertedAt));
  const cls = reverted ? (f.remediation ? 'remediation' : 'fault') : 'remaining';
  const tries = onAttempt(f.attempts, f.retried);
  const title = reverted
    ? `applied ${clock(applied)}, reverted ${clock(ms(f.revertedAt))} (${formatDuration(ms(f.revertedAt) - applied)})${tries ? ` ${tries}` : ''}`
    : `STILL APPLIED (${f.status}${tries ? ` ${tries}` : ''})${f.error ? `: ${f.error}` : ''}`;
  return { spans: [{ from: applied, to: reverted ? ms(f.revertedAt) : end, cls, title }], marks: [] };
}

/** Bars from each reading's status change to the next (`by`: whose verdicts, when another lane's). */
function readingSpans(changes: { at: string; status: string; detail: string }[], end: number, by?: string): Span[] {
  return changes.map((c, i) => ({
    from: ms(c.at),
    to: i + 1 < changes.length ? ms(changes[i + 1]!.at) : end,
    cls: paint('reading', c.status, 'reading-unknown'),
    title: `${by ? `${by}: ` : ''}${c.status}: ${c.detail}`,
  }));
}

/**
 * The points an observer's values name: pods deleted (with their cause), and the predicted evictions its readings
 * (and those of the guard of its name) hold, each moment once.
 */
function observationMarks(o: Observation, readings: { at: string; eviction?: PredictedEviction }[]): Mark[] {
  const marks: Mark[] = [];
  for (const d of deletionsOf(o) ?? [])
    marks.push({ at: d.at, cls: 'deleted', title: `${clock(d.at)} ${d.pod} on ${d.node} deleted (${d.cause})` });
  const predicted = new Map<number, string>();
  for (const h of [...readings].sort((a, b) => ms(a.at) - ms(b.at))) {
    const p = prediction(h);
    if (p) predicted.set(...p);
  }
  for (const [at, title] of predicted) marks.push({ at, cls: 'predicted', title });
  return marks.filter((m) => Number.isFinite(m.at));
}

function svg(groups: Group[], axis: Axis): Markup {
  const x = xOf(axis);
  const rows = groups.reduce((n, g) => n + 1 + g.lanes.length, 0);
  const height = AXIS_H + rows * ROW_H + 4;
  const out: Markup[] = grid(axis, AXIS_H - 4, height, true);
  let y = AXIS_H;
  for (const g of groups) {
    out.push(markup`<text class="group" x="4" y="${y + ROW_H - 7}">${g.title}</text>`);
    y += ROW_H;
    for (const lane of g.lanes) {
      const row: Markup[] = [
        markup`<text class="label" x="14" y="${y + ROW_H - 7}">${fitLabel(lane.label, 2)}<title>${lane.label}</title></text>`,
      ];
      if (!lane.spans.length && !lane.marks.length) row.push(noDataBar(axis, y + 4, ROW_H - 8, 'lane'));
      for (const s of lane.spans) {
        const w = Math.max(x(s.to) - x(s.from), 2);
        row.push(
          markup`<rect class="${classToken(s.cls)}" x="${x(s.from).toFixed(1)}" y="${y + 4}" width="${w.toFixed(1)}" height="${ROW_H - 8}"><title>${s.title}</title></rect>`,
        );
      }
      for (const m of lane.marks) {
        const mx = x(m.at).toFixed(1);
        row.push(
          markup`<path class="${classToken(m.cls)}" d="M${mx} ${y + 2} l5 ${ROW_H / 2 - 2} l-5 ${ROW_H / 2 - 2} l-5 -${ROW_H / 2 - 2} z"><title>${m.title}</title></path>`,
        );
      }
      out.push(markup`<g class="row" data-group="${g.title}" data-lane="${lane.label}">${joinMarkup(row)}</g>`);
      y += ROW_H;
    }
  }
  return chartSvg(height, 'run timeline', joinMarkup(out, '\n'));
}

function table(headers: string[], rows: MarkupValue[][]): Markup {
  if (rows.length === 0) return markup`<p class="none">none</p>`;
  const cells = rows.map((row) => markup`<tr>${row.map((c) => markup`<td>${c}</td>`)}</tr>`);
  return markup`<table><tr>${headers.map((h) => markup`<th>${h}</th>`)}</tr>\n${joinMarkup(cells, '\n')}</table>`;
}

function tables(r: RunReport): Markup {
  const t = (iso?: string) => (iso ? clock(ms(iso)) : '—');
  const parts: Markup[] = [];
  if (r.remaining.length) {
    const items = r.remaining.map(
      (f) => markup`<li><b>${faultLabel(f)}</b> (${f.faultId})${f.manualRevert ? markup`<pre>${f.manualRevert}</pre>` : ''}</li>`,
    );
    const recover = r.recoverCommand ? markup`<p>Revert them with <code>${r.recoverCommand}</code></p>` : '';
    parts.push(markup`<section class="still-applied"><h2>Still applied</h2><ul>${items}</ul>${recover}</section>`);
  }
  parts.push(
    markup`<h2>Steps</h2>`,
    table(
      ['step', 'kind', 'started', 'ended', 'status', 'detail'],
      r.steps.map((s) => [`${s.index}. ${s.name}`, s.kind, t(s.startedAt), t(s.endedAt), s.status ?? 'unfinished', s.detail ?? '']),
    ),
  );
  const status = (f: FaultRecord) =>
    [f.status, onAttempt(f.attempts, f.retried)].filter(Boolean).join(' ') + (f.error ? `: ${f.error}` : '');
  parts.push(
    markup`<h2>Faults</h2>`,
    table(
      ['fault', 'step', 'applied', 'reverted', 'status'],
      r.faults.map((f) => [faultLabel(f), f.step, t(f.appliedAt), t(f.revertedAt), status(f)]),
    ),
  );
  if (r.attempts.length) {
    const dropped = r.attemptsDropped ? markup`<p class="none">${r.attemptsDropped} more not kept</p>` : '';
    const attempts = table(
      ['at', 'attempt'],
      r.attempts.map((a) => [t(a.at), attemptLine(a)]),
    );
    parts.push(markup`<h2>Retried after failures</h2>`, markup`${attempts}${dropped}`);
  }
  if (r.objectives?.length) {
    const recovered = (o: ObjectiveRecord) => (o.recoveryMs === undefined ? '—' : formatDuration(o.recoveryMs));
    const perNode = ({ nodes: n }: ObjectiveRecord) =>
      n?.maxMs === undefined
        ? '—'
        : `${formatDuration(n.p50Ms!)} / ${formatDuration(n.maxMs)} (${n.recovered} node(s); slowest ${n.slowest ?? ''})`;
    parts.push(
      markup`<h2>Recovery objectives</h2>`,
      table(
        ['objective', 'clock started', 'recovered after', 'per node p50 / max', 'within', 'status', 'detail'],
        r.objectives.map((o) => [
          o.name,
          t(o.startedAt),
          recovered(o),
          perNode(o),
          formatDuration(o.withinMs),
          o.status === 'missed' ? markup`<b>MISSED</b>` : o.status,
          o.detail,
        ]),
      ),
    );
  }
  parts.push(
    markup`<h2>Guard firings</h2>`,
    table(
      ['at', 'guard', 'response', 'detail'],
      r.guardFirings.map((g) => [t(g.at), g.guard, g.response, g.detail]),
    ),
  );
  for (const [name, o] of Object.entries(r.observations)) {
    const deletions = deletionsOf(o as Observation);
    if (deletions)
      parts.push(
        markup`<h2>${name}</h2>`,
        table(
          ['at', 'pod', 'node', 'cause'],
          deletions.map((d) => [clock(d.at), d.pod, d.node, d.cause]),
        ),
      );
  }
  parts.push(
    markup`<h2>Preflight</h2>`,
    table(
      ['check', 'result', 'detail'],
      r.preflight.map((p) => [p.check, p.ok ? 'ok' : markup`<b>FAIL</b>`, p.detail]),
    ),
  );
  return joinMarkup(parts, '\n');
}

function page(r: RunReport, chart: Markup, body: Markup): Markup {
  const duration = r.durationMs !== undefined ? formatDuration(r.durationMs) : 'unfinished';
  return markup`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>${`${r.runbook} ${r.runId}: ${r.status}`}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:16px;color:#222;overflow-wrap:break-word}h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:24px 0 6px}
.status-passed{color:#1a7f37}.status-failed,.status-aborted,.status-rollback-incomplete,.status-objective-missed{color:#b42318}.status-interrupted,.status-running{color:#b54708}
table{border-collapse:collapse;max-width:100%}td,th{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}th{background:#f4f4f4}
pre{background:#f7f7f7;padding:6px;white-space:pre-wrap;max-width:100%}td:last-child,code,pre{overflow-wrap:anywhere}.still-applied{border:2px solid #b42318;padding:0 12px;margin:16px 0}.none{color:#777}
svg.chart{display:block;width:100%;height:auto;max-width:1600px}
svg text{font:12px system-ui,sans-serif}.group{font-weight:bold}.tick{fill:#666;text-anchor:middle}
.lane,.values{margin:0;border-top:1px solid #eee}.node{font-weight:bold}.scale{fill:#666;text-anchor:end;font-size:10px}.curve{fill:none;stroke-width:1.6}
.no-data-text,.none-row{fill:#57606a;font-style:italic}
.legend{font-size:13px}.legend h2{margin:12px 0 4px}.legend ul{list-style:none;margin:0;padding:0}.legend>ul>li{margin:2px 0}
.legend li li{display:inline-flex;align-items:center;gap:4px;margin:0 14px 0 0}.legend li li:first-child{margin-left:8px}
${paletteCss()}
</style></head><body>
<h1>${r.runbook} — <span class="status-${classToken(r.status)}">${r.status.toUpperCase()}</span></h1>
<p>${r.reason}<br>run <code>${r.runId}</code> on context <code>${r.context}</code>, started ${r.startedAt}, ${duration}</p>
<p class="none">Hover a bar or a mark for its detail. Bars are stretches of time, diamonds moments; an observer a guard shares its name with shows the guard's verdicts, so the two rows agree.</p>
${legend(chart.toString())}
${chart}
${body}
</body></html>
`;
}
