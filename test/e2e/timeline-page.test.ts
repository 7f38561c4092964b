import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { writeReports } from '../../src/cli/report-files.js';
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

async function dumpDom(file: string): Promise<string> {
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
  const { stdout } = await run(CHROMIUM, [...flags, `--user-data-dir=${profile}`, '--dump-dom', `file://${file}`], {
    timeout: 120_000,
    maxBuffer: 64 * 1024 * 1024,
  });
  return stdout;
}

describe('timeline.html in headless Chromium', () => {
  let dom = '';
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
});
