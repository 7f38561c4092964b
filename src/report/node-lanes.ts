import { formatDuration } from '../core/duration.js';
import type { RunReport } from './collect.js';
import { type Axis, chartSvg, clock, fitLabel, grid, isoOf, LABEL_W, ms, noDataBar, xOf } from './axis.js';
import { paint } from './palette.js';
import { classToken, joinMarkup, markup, type Markup } from './markup.js';
import type { LeaseSample, NodeSeries } from './nodes.js';

const HEAD_H = 22;
const LEASE_H = 40;
const ROW_H = 20;

/** A stretch of time in one state. */
interface Segment {
  from: number;
  to: number;
  state: string;
}

/** Adjacent entries in the same state as one segment, the last one to `end`. */
function segments<T extends { at: string }>(entries: T[], stateOf: (e: T) => string, end: number): Segment[] {
  const out: Segment[] = [];
  entries.forEach((e, i) => {
    const from = ms(e.at);
    const to = i + 1 < entries.length ? ms(entries[i + 1]!.at) : Math.max(end, from);
    const last = out.at(-1);
    if (last?.state === stateOf(e)) last.to = to;
    else out.push({ from, to, state: stateOf(e) });
  });
  return out;
}

const leaseState = (s: LeaseSample) => (s.ageMs === null ? 'none' : s.stale ? 'stale' : 'fresh');

/**
 * The age of the Lease over time: it grows one second a second from each sample and falls to zero at each renewal
 * a later sample tells of; after the last sample it grows to `end`.
 */
function leaseCurve(samples: LeaseSample[], end: number): { at: number; ageMs: number }[] {
  const out: { at: number; ageMs: number }[] = [];
  samples.forEach((s, i) => {
    if (s.ageMs === null) return;
    const at = ms(s.at);
    out.push({ at, ageMs: s.ageMs });
    const next = samples[i + 1];
    const until = next ? ms(next.at) : Math.max(end, at);
    const renewed = next && next.ageMs !== null ? ms(next.at) - next.ageMs : undefined;
    if (renewed !== undefined && renewed > at && renewed < until) {
      out.push({ at: renewed, ageMs: s.ageMs + renewed - at }, { at: renewed, ageMs: 0 });
    } else if (!next || next.ageMs !== null) out.push({ at: until, ageMs: s.ageMs + until - at });
  });
  return out;
}

const bar = (x: (t: number) => number, y: number, h: number, seg: Segment, attrs: Markup, cls: string, title: string) =>
  markup`<rect class="${classToken(cls)}" ${attrs} data-from="${isoOf(seg.from)}" data-to="${isoOf(seg.to)}" x="${x(seg.from).toFixed(1)}" y="${y}" width="${Math.max(x(seg.to) - x(seg.from), 2).toFixed(1)}" height="${h}"><title>${title}</title></rect>`;

const span = (seg: Segment) => `${clock(seg.from)} – ${clock(seg.to)} (${formatDuration(Math.max(0, seg.to - seg.from))})`;

/** Ages the Lease scale ends at (s): the first at or above the oldest age drawn. */
const SCALE_S = [1, 2, 5, 10, 20, 30, 40, 60, 90, 120, 180, 300, 600, 900, 1800, 3600];

/** The top of the one Lease-age scale every node's lane is drawn on: a round age at or above the oldest of them. */
function leaseScale(curves: { ageMs: number }[][]): number {
  const oldest = Math.max(0, ...curves.flat().map((p) => p.ageMs));
  const s = SCALE_S.find((v) => v * 1000 >= oldest);
  return s !== undefined ? s * 1000 : Math.ceil(oldest / 3_600_000) * 3_600_000;
}

/** What each lane is drawn with besides its node's history: the Lease scale, and what the run's readings watched. */
interface LaneScale {
  leaseTopMs: number;
  /** Whether the readings' probes tell of NoExecute taints, of pods deleted (`nodeFacts`): a node without any had none. */
  watched: { taints: boolean; deletions: boolean };
}

/** One node's lane: its faults, the Lease age (fresh/stale, and the age as a curve), Ready, NoExecute taint, pods deleted. */
function lane(r: RunReport, s: NodeSeries, axis: Axis, scale: LaneScale): Markup {
  const x = xOf(axis);
  const end = axis.end;
  const rows = { lease: HEAD_H, ready: HEAD_H + LEASE_H, taint: HEAD_H + LEASE_H + ROW_H, deleted: HEAD_H + LEASE_H + 2 * ROW_H };
  const height = HEAD_H + LEASE_H + 3 * ROW_H + 4;
  const out = grid(axis, 0, height, false);
  out.push(markup`<text class="node" x="4" y="15">${fitLabel(s.node)}<title>${s.node}</title></text>`);
  for (const f of r.faults.filter((f) => f.node === s.node && f.appliedAt)) {
    const to = f.status === 'reverted' && f.revertedAt ? ms(f.revertedAt) : end;
    out.push(
      bar(
        x,
        6,
        10,
        { from: ms(f.appliedAt), to, state: f.status },
        markup`data-kind="fault" data-action="${f.action}"`,
        f.remediation ? 'remediation' : 'fault',
        `${f.action}: ${f.status}`,
      ),
    );
  }
  const label = (y: number, text: string) => markup`<text class="label" x="14" y="${y}">${text}</text>`;
  /** A row nothing was recorded for: said so, not left blank. */
  const noData = (y: number, h: number, kind: string) => noDataBar(axis, y, h, kind);
  /** A row whose source read nothing to draw (no taint, no pod deleted). */
  const none = (y: number, text: string) => markup`<text class="none-row" x="${LABEL_W + 6}" y="${y}">${text}</text>`;

  const curve = leaseCurve(s.lease, end);
  const top = scale.leaseTopMs;
  out.push(
    label(rows.lease + 16, 'Lease age'),
    markup`<text class="scale" data-scale-ms="${top}" x="${LABEL_W - 6}" y="${rows.lease + 10}">${formatDuration(top)}</text>`,
    markup`<text class="scale" x="${LABEL_W - 6}" y="${rows.lease + LEASE_H - 2}">0</text>`,
  );
  if (!s.lease.length) out.push(noData(rows.lease + 2, LEASE_H - 4, 'lease-age'));
  for (const seg of segments(s.lease, leaseState, end))
    out.push(
      bar(
        x,
        rows.lease + 2,
        LEASE_H - 4,
        seg,
        markup`data-kind="lease-age" data-state="${seg.state}"`,
        `lease-${seg.state}`,
        `Lease ${seg.state === 'none' ? 'missing' : seg.state}: ${span(seg)}`,
      ),
    );
  if (curve.length) {
    const y = (age: number) => rows.lease + LEASE_H - 2 - (Math.min(age, top) / top) * (LEASE_H - 6);
    const points = curve.map((p) => `${x(p.at).toFixed(1)},${y(p.ageMs).toFixed(1)}`).join(' ');
    const data = s.lease
      .filter((p) => p.ageMs !== null)
      .map((p) => `${p.at}=${p.ageMs}`)
      .join(' ');
    out.push(
      markup`<polyline class="lease-curve" data-kind="lease-age" data-series="lease age" data-scale-ms="${top}" data-points="${data}" points="${points}"><title>${`Lease age, sampled at renewals (scale 0 – ${formatDuration(top)}, the same for every node)`}</title></polyline>`,
    );
  }

  out.push(label(rows.ready + 14, 'Ready'));
  if (!s.ready.length) out.push(noData(rows.ready + 3, ROW_H - 6, 'ready'));
  for (const seg of segments(s.ready, (e) => e.status, end))
    out.push(
      bar(
        x,
        rows.ready + 3,
        ROW_H - 6,
        seg,
        markup`data-kind="ready" data-status="${seg.state}"`,
        paint('ready', seg.state, 'ready-none'),
        `Ready ${seg.state}: ${span(seg)}`,
      ),
    );

  out.push(label(rows.taint + 14, 'NoExecute taint'));
  const tainted = segments(s.taints, (e) => e.keys.join(' '), end).filter((g) => g.state);
  if (!s.taints.length && !scale.watched.taints) out.push(noData(rows.taint + 3, ROW_H - 6, 'taint'));
  else if (!tainted.length) out.push(none(rows.taint + 14, 'none'));
  for (const seg of tainted)
    out.push(
      bar(x, rows.taint + 3, ROW_H - 6, seg, markup`data-kind="taint" data-keys="${seg.state}"`, 'taint', `${seg.state}: ${span(seg)}`),
    );

  out.push(label(rows.deleted + 14, 'pods deleted'));
  if (!s.deleted.length)
    out.push(scale.watched.deletions ? none(rows.deleted + 14, 'none') : noData(rows.deleted + 3, ROW_H - 6, 'deleted'));
  for (const d of s.deleted) {
    const mx = x(ms(d.at)).toFixed(1);
    const attrs = markup`data-kind="deleted" data-at="${d.at}" data-pod="${d.pod}" data-cause="${d.cause}"`;
    out.push(
      markup`<path class="deleted" ${attrs} d="M${mx} ${rows.deleted + 2} l5 8 l-5 8 l-5 -8 z"><title>${`${clock(ms(d.at))} ${d.pod} deleted (${d.cause})`}</title></path>`,
    );
  }
  const dropped = s.dropped ? markup`<p class="none">${s.dropped} older samples not kept</p>` : '';
  return markup`<section class="lane" data-node="${s.node}">${chartSvg(height, `node ${s.node}`, joinMarkup(out, '\n'))}${dropped}</section>`;
}

/**
 * A lane per target node: the nodes the run's faults targeted first (in their order), then every other node the
 * report has a history of, by name. Every lane draws the Lease age on the same scale, so that lanes compare.
 */
export function renderNodeLanes(r: RunReport, axis: Axis): Markup {
  const byName = new Map(r.nodes.map((s) => [s.node, s]));
  const targets = [...new Set(r.faults.map((f) => f.node).filter((n): n is string => Boolean(n)))];
  const others = [...byName.keys()].filter((n) => !targets.includes(n)).sort();
  const series = [...targets, ...others].map((node) => byName.get(node) ?? { node, lease: [], ready: [], taints: [], deleted: [] });
  if (!series.length) return markup``;
  const scale = {
    leaseTopMs: leaseScale(series.map((s) => leaseCurve(s.lease, axis.end))),
    watched: { taints: r.nodeFacts?.includes('taints') ?? false, deletions: r.nodeFacts?.includes('deleted') ?? false },
  };
  const leftOut = r.nodesLeftOut ? markup`<p class="none">${r.nodesLeftOut} more nodes not kept</p>` : '';
  return markup`<h2>Nodes</h2>\n<p class="none">Per node, on the run's time axis: its faults, the age of its Lease (green fresh, red stale; the line is the age, on one scale for every node: 0 to ${formatDuration(scale.leaseTopMs)}), its Ready condition, NoExecute taints and the pods deleted on it.</p>\n${joinMarkup(
    series.map((s) => lane(r, s, axis, scale)),
    '\n',
  )}${leftOut}`;
}
