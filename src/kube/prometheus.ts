/**
 * Just enough of the Prometheus text format to read etcd's and the apiserver's own metrics: labelled samples,
 * cumulative bucket counts by upper bound, differences between two scrapes, and quantiles as Prometheus's
 * histogram_quantile computes them. Written here rather than taken from a library: a few lines over the format's
 * sample lines, where the maintained parsers come with a Prometheus client or a scrape pipeline.
 */
export type Buckets = Map<number, number>;

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})?\s+(\S+)/;

const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"/g;

/** A sample's labels (escapes \\, \" and \n undone). */
function labelsOf(text: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const m of (text ?? '').matchAll(LABEL)) out[m[1]!] = m[2]!.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
  return out;
}

/** Every sample of the metric `name` with its labels. */
export function series(text: string, name: string): { labels: Record<string, string>; value: number }[] {
  const out: { labels: Record<string, string>; value: number }[] = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const m = LINE.exec(line.trim());
    if (!m || m[1] !== name) continue;
    const value = Number(m[3]);
    if (!Number.isNaN(value)) out.push({ labels: labelsOf(m[2]), value });
  }
  return out;
}

/** Cumulative counts by `le` of one histogram, summed over its other labels (those `keep` accepts, when given). */
export function histogram(text: string, name: string, keep?: (labels: Record<string, string>) => boolean): Buckets {
  const out: Buckets = new Map();
  for (const line of text.split('\n')) {
    const m = LINE.exec(line.trim());
    if (!m || m[1] !== `${name}_bucket`) continue;
    if (keep && !keep(labelsOf(m[2]))) continue;
    const le = /(?:^|,)\s*le="([^"]+)"/.exec(m[2] ?? '')?.[1];
    if (le === undefined) continue;
    const bound = le === '+Inf' ? Infinity : Number(le);
    const count = Number(m[3]);
    if (Number.isNaN(bound) || Number.isNaN(count)) continue;
    out.set(bound, (out.get(bound) ?? 0) + count);
  }
  return out;
}

/** The value of a gauge or counter without labels (or the first series), undefined when absent. */
export function sample(text: string, name: string): number | undefined {
  for (const line of text.split('\n')) {
    const m = LINE.exec(line.trim());
    if (m && m[1] === name) return Number(m[3]);
  }
  return undefined;
}

/** Observations between two scrapes (a counter reset starts over from the later one). */
export function delta(now: Buckets, before: Buckets | undefined): Buckets {
  if (!before) return now;
  const out: Buckets = new Map();
  for (const [le, n] of now) {
    const d = n - (before.get(le) ?? 0);
    if (d < 0) return now;
    out.set(le, d);
  }
  return out;
}

function total(b: Buckets): number {
  return b.get(Infinity) ?? Math.max(0, ...b.values());
}

/** The q-quantile (0..1) in the histogram's unit; undefined without observations. Linear within a bucket. */
export function quantile(q: number, b: Buckets): number | undefined {
  const bounds = [...b.keys()].sort((x, y) => x - y);
  const n = total(b);
  if (!bounds.length || n <= 0) return undefined;
  const rank = q * n;
  let prevBound = 0;
  let prevCount = 0;
  for (const bound of bounds) {
    const count = b.get(bound)!;
    if (count >= rank) {
      if (bound === Infinity) return prevBound;
      if (count === prevCount) return bound;
      return prevBound + ((bound - prevBound) * (rank - prevCount)) / (count - prevCount);
    }
    prevBound = bound;
    prevCount = count;
  }
  return prevBound;
}
