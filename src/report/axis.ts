import { formatDuration } from '../core/duration.js';
import { markup, type Markup } from './markup.js';

/**
 * The timeline's geometry: labels on the left, the run's time across the plot; every chart of the page shares it.
 * These are the units of each chart's viewBox: the page's style sheet scales the charts to the window's width, all by
 * the same factor, so their time axes stay in line.
 */
export const LABEL_W = 230;
export const PLOT_W = 700;
const SVG_W = LABEL_W + PLOT_W + 24;
/** Characters of a label that fit left of the plot. */
const LABEL_CHARS = 34;

/** A label cut to fit left of the plot (`indent` characters in); the whole of it goes in its `<title>`. */
export const fitLabel = (s: string, indent = 0): string => {
  const n = LABEL_CHARS - indent;
  return s.length > n ? `${s.slice(0, n - 1)}…` : s;
};
const TICK_STEPS_S = [0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200];

/** The run's time axis: from its start over `span` ms; `end` is when the run ended (or the last thing seen). */
export interface Axis {
  start: number;
  span: number;
  end: number;
}

/** Report times are ISO strings; values kept from probes may hold epoch milliseconds. */
export const ms = (t: string | number | undefined): number => (typeof t === 'number' ? t : t ? Date.parse(t) : NaN);
export const clock = (at: number): string => (Number.isFinite(at) ? new Date(at).toISOString().slice(11, 23) : '—');
/** An ISO time, or nothing for a time that is none (a report.json may hold anything where a time belongs). */
export const isoOf = (at: number): string => (Number.isFinite(at) ? new Date(at).toISOString() : '');

/** The x of a time, held within the plot. */
export const xOf =
  (axis: Axis) =>
  (t: number): number =>
    LABEL_W + (Math.min(Math.max(t - axis.start, 0), axis.span) / axis.span) * PLOT_W;

/** A chart's `<svg>` of `height` units around `body`: as wide as the window lets it be, its units scaled alike. */
export const chartSvg = (height: number, label: string, body: Markup): Markup =>
  markup`<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 ${SVG_W} ${height}" role="img" aria-label="${label}">\n${body}\n</svg>`;

/** A row nothing was recorded for, from `y`, `h` high: a bar over the run that says so, not a blank. */
export function noDataBar(axis: Axis, y: number, h: number, row: string): Markup {
  const x = xOf(axis);
  const from = x(axis.start);
  const w = Math.max(x(axis.end) - from, 2);
  return markup`<rect class="no-data" data-kind="no-data" data-row="${row}" x="${from.toFixed(1)}" y="${y}" width="${w.toFixed(1)}" height="${h}"><title>no data: nothing was recorded for this row</title></rect><text class="no-data-text" x="${(from + 6).toFixed(1)}" y="${y + h / 2 + 4}">no data</text>`;
}

/** Grid lines from `top` to `bottom` (with the tick labels above `top` when `labels`) and the dashed end of the run. */
export function grid(axis: Axis, top: number, bottom: number, labels: boolean): Markup[] {
  const x = xOf(axis);
  const out: Markup[] = [];
  // past two hours a tick per whole number of hours, about ten of them (a report may say a run lasted centuries)
  const step = TICK_STEPS_S.find((s) => axis.span / 1000 / s <= 10) ?? Math.ceil(axis.span / 1000 / 10 / 3600) * 3600;
  for (let s = 0; s * 1000 <= axis.span; s += step) {
    const tx = x(axis.start + s * 1000);
    out.push(markup`<line class="grid" x1="${tx}" y1="${top}" x2="${tx}" y2="${bottom}"/>`);
    if (labels)
      out.push(markup`<text class="tick" x="${tx}" y="${top - 4}">${s === 0 ? '0s' : formatDuration(Math.round(s * 1000))}</text>`);
  }
  out.push(
    markup`<line class="end" x1="${x(axis.end)}" y1="${top}" x2="${x(axis.end)}" y2="${bottom}"><title>run ended ${clock(axis.end)}</title></line>`,
  );
  return out;
}
