/**
 * A reading history of bounded size that covers the whole run: every reading the report must keep (a violation, a
 * change of status) stays, and of the others every `every`-th, `every` doubling each time they outgrow `max` (the
 * older half of the kept ones dropped evenly), so that a long run keeps an even sample from its first reading to its
 * last instead of stopping at the first `max`.
 */
export class ThinnedHistory<T> {
  /** The entries kept, in the order they came; the array is kept up to date in place. */
  readonly entries: T[] = [];
  /** Per entry, its number among the ordinary readings, or -1 for one that always stays. */
  private readonly ordinals: number[] = [];
  private ordinary = 0;
  private keptOrdinary = 0;
  /** Only every `every`-th ordinary reading is kept. */
  every = 1;
  /** Readings offered, and how many always stay. */
  seen = 0;

  constructor(
    private readonly max: number,
    /** Always-kept entries past this are thinned like the others (a run violated for hours). */
    private readonly maxKept = 10 * max,
  ) {}

  push(entry: T, keep: boolean): void {
    this.seen++;
    const always = keep && this.entries.length - this.keptOrdinary < this.maxKept;
    if (!always) {
      const n = this.ordinary++;
      if (n % this.every !== 0) return;
      this.ordinals.push(n);
      this.keptOrdinary++;
    } else this.ordinals.push(-1);
    this.entries.push(entry);
    if (this.keptOrdinary > this.max) this.thin();
  }

  /** Whether readings were left out. */
  get thinned(): boolean {
    return this.entries.length < this.seen;
  }

  private thin(): void {
    this.every *= 2;
    let w = 0;
    for (let i = 0; i < this.entries.length; i++) {
      const n = this.ordinals[i]!;
      if (n >= 0 && n % this.every !== 0) continue;
      this.entries[w] = this.entries[i]!;
      this.ordinals[w++] = n;
    }
    this.entries.length = this.ordinals.length = w;
    this.keptOrdinary = this.ordinals.filter((n) => n >= 0).length;
  }
}
