import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { writeReports } from '../../src/session/report-files.js';
import { createLogger } from '../../src/core/logger.js';
import { ensureAptPackages } from '../../packages/lab/src/install/install.js';
import { ReportCollector } from '../../src/report/collect.js';
import { CUT, cutOffRun, T0 } from '../fixtures/cut-off-run.js';
import { cli } from './helpers/lab.js';
import { redactEvent } from '../../src/engine/sinks.js';

/**
 * timeline.html as a browser shows it: Debian's Chromium (installed here when missing, as the lab installs its
 * packages) loads the page of a synthetic run, as `kube-runbook report` renders it again from the run's report.json,
 * and prints its DOM, from which the node lanes and curves are read.
 */
const CHROMIUM = '/usr/bin/chromium';
const run = promisify(execFile);
const iso = (s: number) => new Date(T0 + s * 1000).toISOString();

interface El {
  tag: string;
  attrs: Record<string, string>;
}

const unescape = (s: string) =>
  s
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&');

/** The start tags of a piece of serialized DOM, with their attributes. */
function elements(html: string): El[] {
  return [...html.matchAll(/<([a-z]+)((?:\s+[^\s=>]+(?:="[^"]*")?)*)\s*\/?>/g)].map((m) => ({
    tag: m[1]!,
    attrs: Object.fromEntries([...m[2]!.matchAll(/([^\s=]+)(?:="([^"]*)")?/g)].map((a) => [a[1]!, unescape(a[2] ?? '')])),
  }));
}

/** Each `<section class="…">` of the page by its data attribute, with the elements inside it. */
function sections(dom: string, cls: string, key: string): Map<string, El[]> {
  const out = new Map<string, El[]>();
  for (const m of dom.matchAll(/<section\b[^>]*>[\s\S]*?<\/section>/g)) {
    const [head, ...inner] = elements(m[0]);
    if (head?.attrs.class === cls && head.attrs[key] !== undefined) out.set(head.attrs[key], inner);
  }
  return out;
}

const kind = (els: El[], k: string) => els.filter((e) => e.attrs['data-kind'] === k);

async function ensureChromium(): Promise<void> {
  if (!existsSync(CHROMIUM))
    await ensureAptPackages(['chromium'], { log: createLogger((_level, msg) => process.stderr.write(`[chromium] ${msg}\n`)) });
  expect(existsSync(CHROMIUM), `${CHROMIUM} after apt-get install chromium`).toBe(true);
}

/** Chromium on `file`, `width` px wide, with `args` (what to print or save). */
async function chromium(file: string, width: number, height: number, args: string[]): Promise<string> {
  const profile = mkdtempSync(join(tmpdir(), 'kr-chromium-'));
  const flags = [
    '--headless',
    '--no-sandbox',
    '--disable-gpu',
    '--disable-quic',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
  ];
  const size = `--window-size=${width},${height}`;
  const { stdout } = await run(CHROMIUM, [...flags, size, `--user-data-dir=${profile}`, ...args, `file://${file}`], {
    timeout: 120_000,
    maxBuffer: 64 * 1024 * 1024,
  });
  return stdout;
}

const dumpDom = (file: string) => chromium(file, 1200, 900, ['--dump-dom']);

/** What the page looks like laid out in a window 1,000 px wide, as `MEASURE` reads it. */
interface Measured {
  innerWidth: number;
  scrollWidth: number;
  clientWidth: number;
  /** Each shape drawn on a chart: its classes and the colour it is painted in. */
  drawn: { cls: string; colour: string }[];
  /** Each legend entry: the class it explains and the colour of its sample. */
  legend: { cls: string; colour: string; label: string }[];
  /** Each value curve: its colour, and the colours of the series names of its chart. */
  curves: { colour: string; labels: string[] }[];
}

/**
 * Added to a copy of the page (the page has no script of its own): reads the laid-out page, the colours as the
 * browser paints them, and leaves what it read in the DOM, which `--dump-dom` prints.
 */
const MEASURE = `<script>
const paint = (e) => { const s = getComputedStyle(e); return e.tagName === 'line' || s.fill === 'none' ? s.stroke : s.fill; };
const shapes = (root) => [...root.querySelectorAll('rect, path, polyline, line')].filter((e) => e.getAttribute('class'));
const measured = {
  innerWidth,
  scrollWidth: document.scrollingElement.scrollWidth,
  clientWidth: document.scrollingElement.clientWidth,
  drawn: shapes(document).filter((e) => !e.closest('.legend') && !e.classList.contains('curve')).map((e) => ({ cls: e.getAttribute('class'), colour: paint(e) })),
  legend: [...document.querySelectorAll('.legend li[data-class]')].map((li) => ({ cls: li.dataset.class, colour: paint(shapes(li)[0]), label: li.textContent })),
  curves: [...document.querySelectorAll('path.curve')].map((e) => ({ colour: getComputedStyle(e).stroke, labels: [...e.closest('svg').querySelectorAll('text.label')].map((t) => getComputedStyle(t).fill) })),
};
document.body.setAttribute('data-measured', JSON.stringify(measured));
</script>`;

async function measure(page: string): Promise<Measured> {
  const copy = join(mkdtempSync(join(tmpdir(), 'kr-measure-')), 'page.html');
  writeFileSync(copy, readFileSync(page, 'utf8').replace('</body>', `${MEASURE}</body>`));
  const dom = await chromium(copy, 1000, 900, ['--dump-dom']);
  const json = /<body[^>]* data-measured="([^"]*)"/.exec(dom)?.[1];
  expect(json, 'the measuring script ran').toBeDefined();
  return JSON.parse(unescape(json!)) as Measured;
}

/** Where screenshots are kept for a person to look at (test-results/ is not committed). */
const SHOTS = join(import.meta.dirname, '../../test-results/timeline-page');

describe('timeline.html in headless Chromium', () => {
  let dom = '';
  let page = '';
  beforeAll(async () => {
    await ensureChromium();
    const collector = new ReportCollector();
    for (const e of cutOffRun()) collector.onEvent(redactEvent(e));
    const dir = join(mkdtempSync(join(tmpdir(), 'kr-timeline-')), 'report');
    writeReports(dir, collector.report);
    // the page `kube-runbook report` renders again from the saved report.json is the one the run wrote: that is shown
    const again = join(dir, 'again.html');
    const r = await cli(['report', join(dir, 'report.json'), '--html', again]);
    expect(r.code, r.stderr).toBe(0);
    expect(readFileSync(again, 'utf8')).toBe(readFileSync(join(dir, 'timeline.html'), 'utf8'));
    dom = await dumpDom(again);
    page = again;
  }, 900_000);

  it('shows a lane per target node: the cut-off node first, then the others a probe reported on', () => {
    expect(dom).toContain('kubelet-partition');
    expect([...sections(dom, 'lane', 'data-node').keys()]).toEqual(['node-1', 'cp-1', 'node-2']);
  });

  it("has the cut-off node's Lease go stale, then Ready Unknown, the unreachable taint and a pod deleted, in that order", () => {
    const lane = sections(dom, 'lane', 'data-node').get('node-1')!;
    const stale = kind(lane, 'lease-age').find((e) => e.attrs['data-state'] === 'stale');
    expect(stale?.attrs).toMatchObject({ 'data-from': iso(CUT.stale), 'data-to': iso(CUT.renewed + 1) });
    const ready = kind(lane, 'ready').map((e) => [e.attrs['data-status'], e.attrs['data-from'], e.attrs['data-to']]);
    expect(ready).toEqual([
      ['True', iso(0), iso(CUT.unknown)],
      ['Unknown', iso(CUT.unknown), iso(CUT.ready)],
      ['True', iso(CUT.ready), iso(CUT.end)],
    ]);
    // cause before effect, on the page as in the data: the Unknown bar starts right of where the Lease turned stale
    const unknown = kind(lane, 'ready').find((e) => e.attrs['data-status'] === 'Unknown')!;
    expect(Number(unknown.attrs.x)).toBeGreaterThan(Number(stale!.attrs.x));
    expect(kind(lane, 'taint').map((e) => e.attrs)).toEqual([
      expect.objectContaining({
        'data-keys': 'node.kubernetes.io/unreachable',
        'data-from': iso(CUT.tainted),
        'data-to': iso(CUT.untainted),
      }),
    ]);
    expect(kind(lane, 'deleted').map((e) => e.attrs)).toEqual([
      expect.objectContaining({ 'data-pod': 'demo/web-1', 'data-at': iso(CUT.deleted), 'data-cause': 'taint-eviction' }),
    ]);
    expect(kind(lane, 'fault').map((e) => [e.attrs['data-action'], e.attrs['data-from'], e.attrs['data-to']])).toEqual([
      ['block-kubelet-egress', iso(CUT.applied), iso(CUT.reverted)],
    ]);
    // the age curve climbs past 40 s while the node is cut off
    const curve = kind(lane, 'lease-age').find((e) => e.tag === 'polyline')!;
    const ages = curve.attrs['data-points']!.split(' ').map((p) => Number(p.split('=')[1]));
    expect(Math.max(...ages)).toBeGreaterThan(40_000);
  });

  it('shows the other nodes fresh, Ready and untainted throughout', () => {
    for (const node of ['cp-1', 'node-2']) {
      const lane = sections(dom, 'lane', 'data-node').get(node)!;
      expect(
        kind(lane, 'lease-age')
          .filter((e) => e.tag === 'rect')
          .map((e) => e.attrs['data-state']),
      ).toEqual(['fresh']);
      expect(kind(lane, 'ready').map((e) => e.attrs['data-status'])).toEqual(['True']);
      expect(kind(lane, 'taint')).toEqual([]);
      expect(kind(lane, 'deleted')).toEqual([]);
    }
  });

  it("plots the PromQL guard's series and the expect step's ready counts with their points", () => {
    const charts = sections(dom, 'values', 'data-source');
    expect([...charts.keys()]).toEqual(['guard kubelets up', '1. steady state']);
    const up = charts.get('guard kubelets up')!.find((e) => e.attrs['data-series'] === '{job="kubelet"}')!;
    const points = up.attrs['data-points']!.split(' ');
    expect(points[0]).toBe(`${iso(0)}=3`);
    expect(points).toContain(`${iso(46)}=2`);
    expect(points.at(-1)).toBe(`${iso(CUT.end)}=3`);
    expect(up.attrs.d).toMatch(/^M[\d.]+ [\d.]+ H/);
    const ready = charts.get('1. steady state')!.find((e) => e.attrs['data-series'] === 'ready')!;
    expect(ready.attrs['data-points']).toBe(`${iso(1)}=2 ${iso(3)}=3`);
  });

  const example = join(import.meta.dirname, '../../examples/reports/apiserver-outage/timeline.html');
  for (const [what, file] of [
    ['this run', () => page],
    ['the lab run in examples/reports', () => example],
  ] as const)
    it(`fits ${what} into a window 1,000 px wide, with a legend of every colour it paints; a screenshot to look at`, async () => {
      const m = await measure(file());
      expect(m.innerWidth).toBe(1000);
      // no horizontal scroll
      expect(m.scrollWidth).toBeLessThanOrEqual(m.clientWidth);
      const legend = new Map(m.legend.map((l) => [l.cls, l]));
      expect(m.drawn.length).toBeGreaterThan(20);
      expect(m.drawn.filter((d) => !d.cls.split(' ').some((c) => legend.has(c))).map((d) => d.cls)).toEqual([]);
      // as painted: each colour drawn is the colour of a legend sample
      const samples = new Set(m.legend.map((l) => l.colour));
      expect([...new Set(m.drawn.map((d) => d.colour))].filter((c) => !samples.has(c))).toEqual([]);
      expect(m.legend.find((l) => l.cls === 'end')?.label).toBe('end of the run');
      // each value curve's colour names its series
      for (const c of m.curves) expect(c.labels).toContain(c.colour);
      mkdirSync(SHOTS, { recursive: true });
      const shot = join(SHOTS, `${what === 'this run' ? 'cut-off-run' : 'apiserver-outage'}-1000px.png`);
      await chromium(file(), 1000, 2400, ['--hide-scrollbars', `--screenshot=${shot}`]);
      expect(readFileSync(shot).subarray(1, 4).toString()).toBe('PNG');
    });

  it('shows the lanes of nodes on one Lease-age scale, and "no data" for rows nothing was recorded for', async () => {
    const scales = [...sections(dom, 'lane', 'data-node').values()].map(
      (lane) => kind(lane, 'lease-age').find((e) => e.tag === 'polyline')?.attrs['data-scale-ms'],
    );
    expect(new Set(scales)).toEqual(new Set(['90000']));
    const exampleDom = await dumpDom(example);
    // the lab's control-plane host runs no kubelet: no Lease, no Ready condition; the taints read list no taint of it
    const cp = sections(exampleDom, 'lane', 'data-node').get('cp-1')!;
    expect(kind(cp, 'no-data').map((e) => e.attrs['data-row'])).toEqual(['lease-age', 'ready']);
    expect(exampleDom).toMatch(/<section class="lane" data-node="cp-1">(?:(?!<\/section>)[\s\S])*class="none-row"[^>]*>none<\/text>/);
  });
});
