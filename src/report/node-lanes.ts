import { formatDuration } from '../core/duration.js';
import type { RunReport } from './collect.js';
import { type Axis, clock, grid, isoOf, LABEL_W, ms, SVG_W, xOf } from './axis.js';
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

/** One node's lane: its faults, the Lease age (fresh/stale, and the age as a curve), Ready, NoExecute taint, pods deleted. */
function lane(r: RunReport, s: NodeSeries, axis: Axis): Markup {
  const x = xOf(axis);
  const end = axis.end;
  const rows = { lease: HEAD_H, ready: HEAD_H + LEASE_H, taint: HEAD_H + LEASE_H + ROW_H, deleted: HEAD_H + LEASE_H + 2 * ROW_H };
  const height = HEAD_H + LEASE_H + 3 * ROW_H + 4;
  const out = grid(axis, 0, height, false);
  out.push(markup`<text class="node" x="4" y="15">${s.node}</text>`);
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

  const curve = leaseCurve(s.lease, end);
  const top = Math.max(1000, ...curve.map((p) => p.ageMs));
  out.push(
    label(rows.lease + 16, 'Lease age'),
    markup`<text class="scale" x="${LABEL_W - 6}" y="${rows.lease + 10}">${formatDuration(top)}</text>`,
  );
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
    const y = (age: number) => rows.lease + LEASE_H - 2 - (age / top) * (LEASE_H - 6);
    const points = curve.map((p) => `${x(p.at).toFixed(1)},${y(p.ageMs).toFixed(1)}`).join(' ');
    const data = s.lease
      .filter((p) => p.ageMs !== null)
      .map((p) => `${p.at}=${p.ageMs}`)
      .join(' ');
    out.push(
      markup`<polyline class="lease-curve" data-kind="lease-age" data-series="lease age" data-points="${data}" points="${points}"><title>Lease age, sampled at renewals</title></polyline>`,
    );
  }

  out.push(label(rows.ready + 14, 'Ready'));
  for (const seg of segments(s.ready, (e) => e.status, end))
    out.push(
      bar(
        x,
        rows.ready + 3,
        ROW_H - 6,
        seg,
        markup`data-kind="ready" data-status="${seg.state}"`,
        `ready-${/^(True|False|Unknown)$/.test(seg.state) ? seg.state : 'none'}`,
        `Ready ${seg.state}: ${span(seg)}`,
      ),
    );

  out.push(label(rows.taint + 14, 'NoExecute taint'));
  for (const seg of segments(s.taints, (e) => e.keys.join(' '), end).filter((g) => g.state))
    out.push(
      bar(x, rows.taint + 3, ROW_H - 6, seg, markup`data-kind="taint" data-keys="${seg.state}"`, 'taint', `${seg.state}: ${span(seg)}`),
    );

  out.push(label(rows.deleted + 14, 'pods deleted'));
  for (const d of s.deleted) {
    const mx = x(ms(d.at)).toFixed(1);
    const attrs = markup`data-kind="deleted" data-at="${d.at}" data-pod="${d.pod}" data-cause="${d.cause}"`;
    out.push(
      markup`<path class="deleted" ${attrs} d="M${mx} ${rows.deleted + 2} l5 8 l-5 8 l-5 -8 z"><title>${`${clock(ms(d.at))} ${d.pod} deleted (${d.cause})`}</title></path>`,
    );
  }
  const dropped = s.dropped ? markup`<p class="none">${s.dropped} older samples not kept</p>` : '';
  return markup`<section class="lane" data-node="${s.node}"><svg xmlns="http://www.w3.org/2000/svg" width="${SVG_W}" height="${height}" role="img" aria-label="${`node ${s.node}`}">\n${joinMarkup(out, '\n')}\n</svg>${dropped}</section>`;
}

/**
 * A lane per target node: the nodes the run's faults targeted first (in their order), then every other node the
 * report has a history of, by name.
 */
export function renderNodeLanes(r: RunReport, axis: Axis): Markup {
  const byName = new Map(r.nodes.map((s) => [s.node, s]));
  const targets = [...new Set(r.faults.map((f) => f.node).filter((n): n is string => Boolean(n)))];
  const others = [...byName.keys()].filter((n) => !targets.includes(n)).sort();
  const series = [...targets, ...others].map((node) => byName.get(node) ?? { node, lease: [], ready: [], taints: [], deleted: [] });
  if (!series.length) return markup``;
  const leftOut = r.nodesLeftOut ? markup`<p class="none">${r.nodesLeftOut} more nodes not kept</p>` : '';
  return markup`<h2>Nodes</h2>\n<p class="none">Per node, on the run's time axis: its faults, the age of its Lease (green fresh, red stale; the line is the age), its Ready condition, NoExecute taints and the pods deleted on it.</p>\n${joinMarkup(
    series.map((s) => lane(r, s, axis)),
    '\n',
  )}${leftOut}`;
}
