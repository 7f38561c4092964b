import { describe, expect, it } from 'vitest';
import { CUT, cutOffRun, partition, T0 } from '../../test/fixtures/cut-off-run.js';
import type { RunEvent } from '../engine/events.js';
import { LABEL_W, PLOT_W } from './axis.js';
import { ReportCollector } from './collect.js';
import { renderTimeline } from './timeline.js';
import { redactEvent } from '../engine/sinks.js';
import promql from '../probes/promql.js';
import { guardReading } from '../testing/reading-facts.js';

const iso = (s: number) => new Date(T0 + s * 1000).toISOString();
const x = (s: number, runS: number = CUT.end) => (LABEL_W + (s / runS) * PLOT_W).toFixed(1);

function render(events: RunEvent[]): string {
  const c = new ReportCollector();
  for (const e of events) c.onEvent(redactEvent(e));
  return renderTimeline(c.report);
}

/** The HTML of each `<section class="…" data-…="key">`. */
function sections(html: string, cls: string): Map<string, string> {
  return new Map(
    [...html.matchAll(new RegExp(`<section class="${cls}" data-[a-z]+="([^"]*)">([\\s\\S]*?)</section>`, 'g'))].map((m) => [m[1]!, m[2]!]),
  );
}

describe('HTML timeline: node lanes and value curves', () => {
  const html = render(cutOffRun());

  it('has a lane per target node, the faults’ targets first, each with its Lease, Ready, taint and deleted pods', () => {
    const lanes = sections(html, 'lane');
    expect([...lanes.keys()]).toEqual(['node-1', 'cp-1', 'node-2']);
    const n1 = lanes.get('node-1')!;
    expect(n1).toContain(
      `data-kind="lease-age" data-state="stale" data-from="${iso(CUT.stale)}" data-to="${iso(CUT.renewed + 1)}" x="${x(CUT.stale)}"`,
    );
    expect(n1).toContain(
      `data-kind="ready" data-status="Unknown" data-from="${iso(CUT.unknown)}" data-to="${iso(CUT.ready)}" x="${x(CUT.unknown)}"`,
    );
    expect(n1).toContain(
      `data-kind="taint" data-keys="node.kubernetes.io/unreachable" data-from="${iso(CUT.tainted)}" data-to="${iso(CUT.untainted)}"`,
    );
    expect(n1).toContain(
      `data-kind="deleted" data-at="${iso(CUT.deleted)}" data-pod="demo/web-1" data-cause="taint-eviction" d="M${x(CUT.deleted)} `,
    );
    expect(n1).toContain(
      `data-kind="fault" data-action="block-kubelet-egress" data-from="${iso(CUT.applied)}" data-to="${iso(CUT.reverted)}"`,
    );
    expect(lanes.get('node-2')).not.toMatch(/data-state="stale"|data-kind="taint"|data-kind="deleted"/);
  });

  it('draws the Lease age as a saw: highest (71 s) at the renewal after the cut, zero right after', () => {
    const n1 = sections(html, 'lane').get('node-1')!;
    const points = /<polyline class="lease-curve"[^>]* points="([^"]*)"/
      .exec(n1)![1]!
      .split(' ')
      .map((p) => p.split(',').map(Number) as [number, number]);
    const top = Math.min(...points.map((p) => p[1]));
    const peak = points.findIndex((p) => p[1] === top);
    expect(points[peak]![0].toFixed(1)).toBe(x(CUT.renewed));
    expect(points[peak + 1]![0].toFixed(1)).toBe(x(CUT.renewed));
    expect(points[peak + 1]![1]).toBeGreaterThan(top + 20);
    // on a scale to a round age above the oldest, 71 s: 1m30s
    expect(n1).toContain('data-scale-ms="90000" x="224" y="32">1m30s</text>');
  });

  it("plots each guard's and expect step's numbers with their points", () => {
    const charts = sections(html, 'values');
    expect([...charts.keys()]).toEqual(['guard kubelets up', '1. steady state']);
    expect(charts.get('guard kubelets up')).toContain(`data-series="{job=&quot;kubelet&quot;}" data-points="${iso(0)}=3 ${iso(2)}=3`);
    expect(charts.get('1. steady state')).toContain(`data-series="ready" data-points="${iso(1)}=2 ${iso(3)}=3"`);
    expect(charts.get('1. steady state')).toContain(`data-series="wanted" data-points="${iso(1)}=3 ${iso(3)}=3"`);
  });

  it('breaks a curve where a reading had no value, and names the series past eight', () => {
    const series = (n: number, v: number) => ({ series: Array.from({ length: n }, (_, i) => ({ labels: { i: String(i) }, value: v })) });
    const read = (s: number, value: unknown): RunEvent =>
      guardReading(promql.meta, 'q', T0 + s * 1000, { status: value ? 'ok' : 'unknown', at: T0 + s * 1000, detail: '', value });
    const page = render([
      { type: 'run-start', at: T0, runId: 'r', runbook: 'rb', context: 'lab', dryRun: false, journal: '/j' },
      read(1, series(10, 1)),
      read(2, null),
      read(3, series(10, 2)),
      { type: 'run-end', at: T0 + 4000, status: 'passed', reason: '', remaining: [] },
    ]);
    const q = sections(page, 'values').get('guard q')!;
    expect(q.match(/data-series=/g)).toHaveLength(8);
    expect(q).toContain(`data-series="{i=&quot;0&quot;}" data-points="${iso(1)}=1 ${iso(2)}= ${iso(3)}=2"`);
    expect(q).toMatch(new RegExp(`d="M${x(1, 4)} [\\d.]+ H${x(2, 4)} M${x(3, 4)} [\\d.]+ H${x(4, 4)}"`));
    expect(q).toContain('2 more series not drawn');
    expect(page).not.toContain('<h2>Nodes</h2>');
  });

  it('has a lane for a targeted node no probe read, and escapes node names', () => {
    const page = render([
      { type: 'run-start', at: T0, runId: 'r', runbook: 'rb', context: 'lab', dryRun: false, journal: '/j' },
      { type: 'fault-applied', at: T0 + 1000, fault: { ...partition, node: 'n"<1>' } },
      { type: 'run-end', at: T0 + 4000, status: 'passed', reason: '', remaining: [] },
    ]);
    const lane = sections(page, 'lane').get('n&quot;&lt;1&gt;')!;
    expect(lane).toContain('data-kind="fault"');
    expect(lane).not.toMatch(/data-kind="(lease-age|ready|taint|deleted)"/);
    expect(page).not.toContain('<h2>Values read</h2>');
  });
});
