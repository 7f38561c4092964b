/**
 * The one parser of durations in runbooks, inventories and CLI flags: `500ms`, `10s`, `5m`, `1h`, `1m30s`.
 * Kubernetes-style (Go's time.ParseDuration subset); a bare number is refused so units are never guessed.
 */
const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
const WHOLE = /^(?:\d+(?:\.\d+)?(?:ms|s|m|h))+$/;
const PART = /(\d+(?:\.\d+)?)(ms|s|m|h)/g;

export function parseDuration(text: string): number | undefined {
  const t = text.trim();
  if (!WHOLE.test(t)) return undefined;
  let total = 0;
  for (const m of t.matchAll(PART)) total += Number(m[1]) * (UNIT_MS[m[2]!] ?? NaN);
  return Number.isFinite(total) ? Math.round(total) : undefined;
}

export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms)) return String(ms);
  const sign = ms < 0 ? '-' : '';
  let rest = Math.abs(Math.round(ms));
  if (rest < 1000) return `${sign}${rest}ms`;
  const parts: string[] = [];
  const h = Math.floor(rest / 3_600_000);
  rest -= h * 3_600_000;
  const m = Math.floor(rest / 60_000);
  rest -= m * 60_000;
  const s = rest / 1000;
  if (h) parts.push(`${h}h`);
  if (m) parts.push(`${m}m`);
  if (s) parts.push(`${Number.isInteger(s) ? s : s.toFixed(1)}s`);
  return sign + parts.join('');
}
