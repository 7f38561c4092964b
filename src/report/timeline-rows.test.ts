import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { cutOffRun, T0 } from '../../test/fixtures/cut-off-run.js';
import type { Reading } from '../contract/probe.js';
import type { RunEvent } from '../engine/events.js';
import { redactEvent } from '../engine/sinks.js';
import evictionForecast from '../probes/eviction-forecast.js';
import { guardReading, withFacts } from '../testing/reading-facts.js';
import { LABEL_W, PLOT_W } from './axis.js';
import { emptyReport, ReportCollector, type RunReport } from './collect.js';
import { parseReport } from './load.js';
import { paletteClasses } from './palette.js';
import { renderTimeline } from './timeline.js';

const at = (s: number) => T0 + s * 1000;
const iso = (s: number) => new Date(at(s)).toISOString();

function collect(events: RunEvent[]): RunReport {
  const c = new ReportCollector();
  for (const e of events) c.onEvent(redactEvent(e));
  return c.report;
}

/** A report.json of a run of `endS` seconds with nothing in it but `extra`. */
const bare = (endS: number, extra: Record<string, unknown>): RunReport =>
  parseReport(
    JSON.stringify({
      ...emptyReport(),
      runId: 'r',
      runbook: 'rb',
      context: 'lab',
      status: 'passed',
      startedAt: iso(0),
      endedAt: iso(endS),
      durationMs: endS * 1000,
      ...extra,
    }),
    'report.json',
  );

/** The classes of the shapes a page draws outside its legend, and the classes its legend explains. */
function classes(page: string): { drawn: Set<string>; legend: Set<string> } {
  const from = page.indexOf('<section class="legend"');
  const to = page.indexOf('</section>', from);
  const [before, legendPart, after] = [page.slice(0, from), page.slice(from, to), page.slice(to)];
  const shapes = (html: string) =>
    [...html.matchAll(/<(?:rect|path|polyline|line) class="([^"]+)"/g)].flatMap((m) => m[1]!.split(' ')).filter((c) => c !== 'curve');
  return {
    drawn: new Set([...shapes(before), ...shapes(after)]),
    legend: new Set([...legendPart.matchAll(/<li data-class="([^"]+)">/g)].map((m) => m[1]!)),
  };
}

/** The rows of the timeline chart by group and label, each with its bars and marks. */
function rows(page: string): Map<string, string> {
  return new Map(
    [...page.matchAll(/<g class="row" data-group="([^"]*)" data-lane="([^"]*)">([\s\S]*?)<\/g>/g)].map((m) => [`${m[1]}/${m[2]}`, m[3]!]),
  );
}

/** The class of the bar of `row` at `s` seconds into a run of `runS` (the last bar that covers it). */
function barAt(row: string, s: number, runS: number): string | undefined {
  const x = LABEL_W + (s / runS) * PLOT_W;
  const bars = [...row.matchAll(/<rect class="([^"]+)" x="([\d.]+)" y="\d+" width="([\d.]+)"/g)];
  return bars.filter((b) => Number(b[2]) <= x && x < Number(b[2]) + Number(b[3])).at(-1)?.[1];
}

describe('the timeline legend', () => {
  const example = readFileSync(new URL('../../examples/reports/apiserver-outage/report.json', import.meta.url), 'utf8');
  const odd = bare(10, {
    guardTransitions: [{ at: iso(1), guard: 'g', status: 'degraded', detail: '' }],
    guardFirings: [{ at: iso(2), guard: 'g', response: 'shrug', detail: '' }],
    nodes: [{ node: 'n', lease: [], ready: [{ at: iso(1), status: 'Maybe' }], taints: [], deleted: [] }],
  });
  for (const [what, report] of [
    ['a cut-off run', collect(cutOffRun())],
    ['the lab run in examples/reports', parseReport(example, 'report.json')],
    ['states the page has no colour of its own for', odd],
  ] as const)
    it(`explains every colour and mark the page of ${what} draws`, () => {
      const { drawn, legend } = classes(renderTimeline(report));
      expect(drawn.size).toBeGreaterThan(3);
      expect([...drawn].filter((c) => !legend.has(c))).toEqual([]);
      // and nothing more: the legend is of this page
      expect([...legend].filter((c) => !drawn.has(c))).toEqual([]);
      expect([...drawn].filter((c) => !paletteClasses().includes(c))).toEqual([]);
    });

  it('draws states it has no colour for in the grey of unknown, which the legend names', () => {
    const page = renderTimeline(odd);
    expect(barAt(rows(page).get('Guards/g')!, 5, 10)).toBe('reading-unknown');
    expect(rows(page).get('Guards/g')).toContain('<path class="fired-other"');
    expect(page).toContain('<li data-class="reading-unknown">');
    expect(page).toContain('unknown (could not read)</li>');
  });

  it('names each value curve in its own colour', () => {
    const page = renderTimeline(collect(cutOffRun()));
    for (const section of page.match(/<section class="values"[\s\S]*?<\/section>/g)!)
      for (const [, series, colour] of section.matchAll(/<path class="curve" data-series="([^"]*)"[^>]* stroke="([^"]+)"/g))
        expect(section).toMatch(
          new RegExp(`<text class="label" [^>]*fill="${colour}">[^<]*<title>${series!.replace(/[^\w]/g, '.')}</title>`),
        );
  });
});

describe('the node lanes', () => {
  const lease = (ages: [number, number][]) => ages.map(([s, ageS]) => ({ at: iso(s), ageMs: ageS * 1000, stale: ageS > 40 }));
  const report = bare(60, {
    nodes: [
      // renewed every 5 s: never older than 5 s
      {
        node: 'calm',
        lease: lease(Array.from({ length: 13 }, (_, i) => [i * 5, 0] as [number, number])),
        ready: [],
        taints: [],
        deleted: [],
      },
      // cut off: 60 s old at the end
      {
        node: 'cut',
        lease: lease([
          [0, 0],
          [60, 60],
        ]),
        ready: [],
        taints: [],
        deleted: [],
      },
    ],
  });
  const lanes = new Map(
    [...renderTimeline(report).matchAll(/<section class="lane" data-node="([^"]+)">([\s\S]*?)<\/section>/g)].map((m) => [m[1]!, m[2]!]),
  );
  /** A lane's Lease-age curve: its scale, and the height of its highest point above the row's zero. */
  const curve = (node: string) => {
    const lane = lanes.get(node)!;
    const [, scale, points] = /<polyline class="lease-curve"[^>]* data-scale-ms="(\d+)"[^>]* points="([^"]*)"/.exec(lane)!;
    const ys = points!.split(' ').map((p) => Number(p.split(',')[1]));
    return { scale: Number(scale), height: Math.max(...ys) - Math.min(...ys) };
  };

  it('draws every Lease age on one scale, labelled, so that lanes compare', () => {
    expect(curve('calm').scale).toBe(60_000);
    expect(curve('cut').scale).toBe(60_000);
    // 5 s is a twelfth of the height 60 s reaches
    expect(curve('calm').height / curve('cut').height).toBeCloseTo(5 / 60, 1);
    for (const lane of lanes.values()) expect(lane).toMatch(/class="scale" data-scale-ms="60000"[^>]*>1m<\/text>/);
  });

  it('says "no data" for a row nothing was recorded for, and "none" where a source saw nothing', () => {
    const kinds = (node: string) => [...lanes.get(node)!.matchAll(/data-kind="no-data" data-row="([^"]+)"/g)].map((m) => m[1]);
    expect(kinds('cut')).toEqual(['ready', 'taint', 'deleted']);
    // an untainted node is in no reading of NoExecute taints: it had none, once a probe that tells of them read
    expect(lanes.get('cut')).toContain('>no data</text>');
    const watched = bare(10, {
      nodeFacts: ['deleted', 'ready', 'taints'],
      nodes: [{ node: 'n', lease: [], ready: [{ at: iso(1), status: 'True' }], taints: [], deleted: [] }],
    });
    const lane = renderTimeline(watched).match(/<section class="lane"[\s\S]*?<\/section>/)![0];
    expect([...lane.matchAll(/data-row="([^"]+)"/g)].map((m) => m[1])).toEqual(['lease-age']);
    expect(lane.match(/class="none-row"[^>]*>none<\/text>/g)).toHaveLength(2);
  });

  it('says "no data" on a timeline row with nothing in it', () => {
    const page = renderTimeline(bare(10, { observations: { quiet: { at: iso(1), status: 'ok', detail: '', value: null, history: [] } } }));
    expect(rows(page).get('Observed/quiet')).toContain('data-kind="no-data" data-row="lane"');
  });
});

describe('the eviction forecast observed and guarded', () => {
  const forecast = (status: Reading['status'], s: number, inS: number | null): Reading => ({
    status,
    at: at(s),
    detail: inS === null ? 'no eviction predicted' : `first eviction in ${inS}s`,
    value: status === 'unknown' ? null : { earliestEviction: inS === null ? null : { at: at(s + inS), pod: 'demo/web-1', node: 'node-1' } },
  });
  // the guard warns 20 s ahead (margin 20s), the run's own observer of the forecast at the eviction (margin 0s); both
  // read the same predictions, and both lose the controller-manager's Lease from 10 s to 14 s
  const events: RunEvent[] = [{ type: 'run-start', at: at(0), runId: 'r', runbook: 'rb', context: 'lab', dryRun: false, journal: '/j' }];
  const moments: [number, number | null, Reading['status'], Reading['status']][] = [
    [1, null, 'ok', 'ok'],
    [10, null, 'unknown', 'unknown'],
    [14, 40, 'ok', 'ok'],
    [25, 28, 'violated', 'ok'],
    [30, null, 'ok', 'ok'],
  ];
  for (const [s, inS, guard, observer] of moments)
    events.push(
      guardReading(evictionForecast.meta, 'eviction forecast', at(s), forecast(guard, s, inS)),
      withFacts(evictionForecast.meta, { type: 'observation', at: at(s), name: 'eviction forecast', reading: forecast(observer, s, inS) }),
    );
  events.push({ type: 'run-end', at: at(40), status: 'passed', reason: '', remaining: [] });
  const report = collect(events);

  it('shows at every moment the verdict of the guard on both rows (the observer reads with a margin of its own)', () => {
    // the axis runs to the last predicted eviction, 14 s + 40 s
    const runS = 54;
    const page = renderTimeline(report);
    const guard = rows(page).get('Guards/eviction forecast')!;
    const observed = rows(page).get('Observed/eviction forecast (as guarded)')!;
    const seen = [2, 12, 20, 27, 35].map((s) => [s, barAt(guard, s, runS), barAt(observed, s, runS)]);
    expect(seen).toEqual([
      [2, 'reading-ok', 'reading-ok'],
      [12, 'reading-unknown', 'reading-unknown'],
      [20, 'reading-ok', 'reading-ok'],
      [27, 'reading-violated', 'reading-violated'],
      [35, 'reading-ok', 'reading-ok'],
    ]);
    // and the predictions on the observed row, each once
    expect(observed.match(/class="predicted"/g)).toHaveLength(2);
    expect(observed).toContain(`evicted at ${iso(54).slice(11, 23)}`);
  });

  it('keeps an observer no guard shares its name with on its own readings', () => {
    const alone = collect(events.filter((e) => e.type !== 'guard-reading'));
    const observed = rows(renderTimeline(alone)).get('Observed/eviction forecast')!;
    expect(barAt(observed, 27, 54)).toBe('reading-ok');
  });
});
