import { joinMarkup, markup, type Markup } from './markup.js';

/** How a class is drawn: a bar, a filled or hollow diamond (a moment), a line, an upright line (grid, end of the run). */
type Shape = 'bar' | 'mark' | 'hollow' | 'line' | 'dashed';

interface Swatch {
  cls: string;
  /** Its CSS declarations. */
  css: string;
  /** What it means, as the legend says it. */
  label: string;
  shape: Shape;
}

const NO_DATA_GREY = 'fill:#d0d7de';

/**
 * Every colour and mark the page draws, by class: the style sheet and the legend are both made from this table, and
 * the renderer asks `paint` for a class, which answers only with one of these, so that nothing on the page is drawn
 * in a colour the legend does not explain.
 */
const PALETTE: readonly { group: string; swatches: readonly Swatch[] }[] = [
  {
    group: 'Steps',
    swatches: [
      { cls: 'step-passed', css: 'fill:#2da44e', label: 'passed', shape: 'bar' },
      { cls: 'step-failed', css: 'fill:#cf222e', label: 'failed', shape: 'bar' },
      { cls: 'step-aborted', css: 'fill:#cf222e', label: 'aborted', shape: 'bar' },
      { cls: 'step-skipped', css: 'fill:#aaa', label: 'skipped', shape: 'bar' },
      { cls: 'step-running', css: 'fill:#d4a72c', label: 'unfinished', shape: 'bar' },
      { cls: 'rollback', css: 'fill:#6e7781', label: 'rollback', shape: 'bar' },
      { cls: 'rollback-incomplete', css: 'fill:#cf222e', label: 'rollback incomplete', shape: 'bar' },
    ],
  },
  {
    group: 'Faults',
    swatches: [
      { cls: 'fault', css: 'fill:#fb8f44', label: 'applied, then reverted', shape: 'bar' },
      { cls: 'remediation', css: 'fill:#0969da', label: 'remediation', shape: 'bar' },
      { cls: 'remaining', css: 'fill:#cf222e', label: 'still applied', shape: 'bar' },
      { cls: 'fault-failed', css: 'fill:#cf222e', label: 'failed to apply', shape: 'mark' },
      { cls: 'attempt', css: 'fill:#d4a72c', label: 'attempt failed, retried', shape: 'mark' },
    ],
  },
  {
    group: 'Guards and observers',
    swatches: [
      { cls: 'reading-ok', css: 'fill:#b4e5c0', label: 'ok', shape: 'bar' },
      { cls: 'reading-violated', css: 'fill:#f5a3a3', label: 'violated', shape: 'bar' },
      { cls: 'reading-unknown', css: NO_DATA_GREY, label: 'unknown (could not read)', shape: 'bar' },
      { cls: 'fired-abort', css: 'fill:#cf222e', label: 'fired: abort', shape: 'mark' },
      { cls: 'fired-remediate', css: 'fill:#cf222e', label: 'fired: remediate', shape: 'mark' },
      { cls: 'fired-warn', css: 'fill:#d4a72c', label: 'fired: warn', shape: 'mark' },
      { cls: 'fired-hold', css: 'fill:#d4a72c', label: 'fired: hold', shape: 'mark' },
      { cls: 'fired-resume', css: 'fill:#2da44e', label: 'resumed', shape: 'mark' },
      { cls: 'fired-other', css: 'fill:#6e7781', label: 'fired (another response)', shape: 'mark' },
      { cls: 'deleted', css: 'fill:#8250df', label: 'pod deleted', shape: 'mark' },
      { cls: 'predicted', css: 'fill:none;stroke:#8250df;stroke-width:1.5', label: 'first eviction predicted', shape: 'hollow' },
    ],
  },
  {
    group: 'Recovery objectives',
    swatches: [
      { cls: 'objective-window', css: 'fill:#eef4ff', label: 'time allowed', shape: 'bar' },
      { cls: 'objective-met', css: 'fill:#2da44e', label: 'met', shape: 'bar' },
      { cls: 'objective-missed', css: 'fill:#cf222e', label: 'missed', shape: 'bar' },
      { cls: 'objective-running', css: NO_DATA_GREY, label: 'clock running', shape: 'bar' },
      { cls: 'objective-unmeasured', css: NO_DATA_GREY, label: 'unmeasured', shape: 'bar' },
      { cls: 'recovered', css: 'fill:#1a7f37', label: 'recovered', shape: 'mark' },
    ],
  },
  {
    group: 'Nodes',
    swatches: [
      { cls: 'lease-fresh', css: 'fill:#dcf2e2', label: 'Lease fresh', shape: 'bar' },
      { cls: 'lease-stale', css: 'fill:#f9c7c7', label: 'Lease stale', shape: 'bar' },
      { cls: 'lease-none', css: NO_DATA_GREY, label: 'no Lease', shape: 'bar' },
      { cls: 'lease-curve', css: 'fill:none;stroke:#57606a;stroke-width:1.2', label: 'Lease age', shape: 'line' },
      { cls: 'ready-True', css: 'fill:#2da44e', label: 'Ready', shape: 'bar' },
      { cls: 'ready-False', css: 'fill:#cf222e', label: 'not Ready', shape: 'bar' },
      { cls: 'ready-Unknown', css: 'fill:#d4a72c', label: 'Ready Unknown', shape: 'bar' },
      { cls: 'ready-none', css: NO_DATA_GREY, label: 'no Ready condition or no Node', shape: 'bar' },
      { cls: 'taint', css: 'fill:#bc4c00', label: 'NoExecute taint', shape: 'bar' },
    ],
  },
  {
    group: 'Every row',
    swatches: [
      { cls: 'no-data', css: 'fill:#f3f4f6;stroke:#d0d7de;stroke-dasharray:3 2', label: 'no data: nothing recorded', shape: 'bar' },
      { cls: 'grid', css: 'stroke:#eee', label: 'time grid (the ticks above the chart)', shape: 'dashed' },
      { cls: 'end', css: 'stroke:#222;stroke-dasharray:4 3', label: 'end of the run', shape: 'dashed' },
    ],
  },
];

const BY_CLASS = new Map(PALETTE.flatMap((g) => g.swatches.map((s) => [s.cls, s] as const)));

/**
 * The class of `kind` + `state` (`reading` + `ok`: `reading-ok`), when the table has it; else `fallback` (a state a
 * report.json names that the page has no colour for is drawn as not known).
 */
export function paint(kind: string, state: string, fallback: string): string {
  const cls = kind ? `${kind}-${state}` : state;
  return BY_CLASS.has(cls) ? cls : fallback;
}

/** The classes that have a colour (for tests: each class drawn is one of these). */
export const paletteClasses = (): string[] => [...BY_CLASS.keys()];

/** The style sheet's rules for the table's classes. */
export const paletteCss = (): string => PALETTE.flatMap((g) => g.swatches.map((s) => `.${s.cls}{${s.css}}`)).join('');

function sample(s: Swatch): Markup {
  const shape =
    s.shape === 'bar'
      ? markup`<rect class="${s.cls}" x="1" y="3" width="18" height="10"/>`
      : s.shape === 'mark' || s.shape === 'hollow'
        ? markup`<path class="${s.cls}" d="M10 1 l6 7 l-6 7 l-6 -7 z"/>`
        : s.shape === 'line'
          ? markup`<path class="${s.cls}" d="M1 13 L13 3 V13 L19 8"/>`
          : markup`<line class="${s.cls}" x1="10" y1="0" x2="10" y2="16"/>`;
  return markup`<li data-class="${s.cls}"><svg xmlns="http://www.w3.org/2000/svg" width="20" height="16" viewBox="0 0 20 16">${shape}</svg>${s.label}</li>`;
}

/**
 * The legend of the colours and marks `drawn` uses (the chart's markup): each group of the table with a class the
 * chart draws, and in it the classes drawn.
 */
export function legend(drawn: string): Markup {
  const used = (s: Swatch) => drawn.includes(`class="${s.cls}"`);
  const groups = PALETTE.map((g) => ({ ...g, swatches: g.swatches.filter(used) })).filter((g) => g.swatches.length);
  const items = groups.map((g) => markup`<li><b>${g.group}</b><ul>${joinMarkup(g.swatches.map(sample))}</ul></li>`);
  return markup`<section class="legend" aria-label="legend"><h2>Legend</h2><ul>${joinMarkup(items, '\n')}</ul></section>`;
}
