import type { ReadingEntry, RunReport } from './collect.js';
import { type Axis, chartSvg, fitLabel, grid, isoOf, LABEL_W, ms, xOf } from './axis.js';
import { joinMarkup, markup, type Markup } from './markup.js';

/** Series drawn per guard or step; past that they are counted. */
const MAX_SERIES = 8;
const LINE_H = 16;
const COLOURS = ['#0969da', '#cf222e', '#1a7f37', '#8250df', '#bc4c00', '#1b7c83', '#6e7781', '#bf3989'];

interface Curve {
  name: string;
  /** Readings in time order; null where the reading had no value for it (a gap). */
  points: { at: number; value: number | null }[];
}

/** A chart: the curves of one guard or expect step, drawn to `until`. */
interface Chart {
  source: string;
  until: number;
  curves: Curve[];
  more: number;
}

function chartOf(source: string, readings: ReadingEntry[] | undefined, until: number): Chart | undefined {
  const curves = new Map<string, Curve>();
  const more = new Set<string>();
  let numeric = false;
  for (const r of readings ?? []) {
    const at = ms(r.at);
    // the numbers its probe declared (a report written before readings carried them charts nothing)
    const numbers = r.numbers ? new Map(Object.entries(r.numbers)) : undefined;
    if (numbers) numeric = true;
    for (const [name, value] of numbers ?? []) {
      if (!curves.has(name)) {
        if (curves.size >= MAX_SERIES) {
          more.add(name);
          continue;
        }
        curves.set(name, { name, points: [] });
      }
      curves.get(name)!.points.push({ at, value });
    }
    for (const c of curves.values()) if (!numbers?.has(c.name) && c.points.at(-1)?.value !== null) c.points.push({ at, value: null });
  }
  return numeric ? { source, until, curves: [...curves.values()], more: more.size } : undefined;
}

/** The charts of a report: each guard's readings to the end of the run, each expect step's to the end of the step. */
function chartsOf(r: RunReport, end: number): Chart[] {
  const guards = Object.entries(r.guardReadings).map(([guard, readings]) => chartOf(`guard ${guard}`, readings, end));
  const steps = r.steps.map((s) => chartOf(`${s.index}. ${s.name}`, s.readings, s.endedAt ? ms(s.endedAt) : end));
  return [...guards, ...steps].filter((c): c is Chart => c !== undefined);
}

/** A step line: each value holds until the next reading, a gap where a reading had none. */
function stepPath(points: Curve['points'], until: number, x: (t: number) => number, y: (v: number) => number): string {
  const parts: string[] = [];
  points.forEach((p, i) => {
    if (p.value === null) return;
    const to = i + 1 < points.length ? points[i + 1]!.at : Math.max(until, p.at);
    const move = i > 0 && points[i - 1]!.value !== null ? 'V' : `M${x(p.at).toFixed(1)}`;
    parts.push(move === 'V' ? `V${y(p.value).toFixed(1)}` : `${move} ${y(p.value).toFixed(1)}`, `H${x(to).toFixed(1)}`);
  });
  return parts.join(' ');
}

function chart(c: Chart, axis: Axis): Markup {
  const x = xOf(axis);
  const values = c.curves.flatMap((k) => k.points.map((p) => p.value)).filter((v): v is number => v !== null);
  const lo = Math.min(0, ...values);
  const hi = Math.max(lo + 1, ...values);
  const height = Math.max(72, LINE_H * (c.curves.length + (c.more ? 1 : 0)) + 28);
  const y = (v: number) => height - 6 - ((v - lo) / (hi - lo)) * (height - 26);
  const out = [
    ...grid(axis, 20, height, false),
    markup`<text class="node" x="4" y="15">${fitLabel(c.source)}<title>${c.source}</title></text>`,
  ];
  out.push(
    markup`<text class="scale" x="${LABEL_W - 6}" y="${y(hi) + 4}">${hi}</text>`,
    markup`<text class="scale" x="${LABEL_W - 6}" y="${y(lo)}">${lo}</text>`,
  );
  out.push(markup`<line class="grid" x1="${LABEL_W}" y1="${y(lo)}" x2="${x(axis.end)}" y2="${y(lo)}"/>`);
  c.curves.forEach((k, i) => {
    const colour = COLOURS[i % COLOURS.length]!;
    const data = k.points.map((p) => `${isoOf(p.at)}=${p.value ?? ''}`).join(' ');
    out.push(
      markup`<text class="label" x="14" y="${34 + i * LINE_H}" fill="${colour}">${fitLabel(k.name, 2)}<title>${k.name}</title></text>`,
    );
    out.push(
      markup`<path class="curve" data-series="${k.name}" data-points="${data}" stroke="${colour}" d="${stepPath(k.points, c.until, x, y)}"><title>${k.name}</title></path>`,
    );
  });
  if (c.more) out.push(markup`<text class="label none" x="14" y="${34 + c.curves.length * LINE_H}">${c.more} more series not drawn</text>`);
  return markup`<section class="values" data-source="${c.source}">${chartSvg(height, `values of ${c.source}`, joinMarkup(out, '\n'))}</section>`;
}

/** The numbers guards and expect steps read (PromQL series, ready counts, objects meeting a condition), as curves on the run's axis. */
export function renderCurves(r: RunReport, axis: Axis): Markup {
  const charts = chartsOf(r, axis.end);
  if (!charts.length) return markup``;
  return markup`<h2>Values read</h2>\n<p class="none">What each guard and expect step read, reading by reading: each value holds until the next; a gap where a reading had none.</p>\n${joinMarkup(
    charts.map((c) => chart(c, axis)),
    '\n',
  )}`;
}
