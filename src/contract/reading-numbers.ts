/**
 * The numbers of a reading a run report charts ("Values read"), declared by the probe (`meta.numbers`): the report
 * draws a curve per name from these alone, whatever the shape of the probe's value.
 */
export type ReadingNumbers = Record<string, number>;

/** How a probe gives the numbers of its readings: what they are, and those of one reading's value. */
export interface NumbersOf<V> {
  /** What the numbers are, in one line, as the reference docs list them. */
  what: string;
  /** The numbers of one reading's value by name (a PromQL series by its labels, `ready`, `met`). */
  of(value: V): ReadingNumbers;
}

/** The finite numbers of a reading whose probe declares some (none for a reading without a value: it cannot tell). */
export function readingNumbers<V>(declared: NumbersOf<V> | undefined, value: V | null): ReadingNumbers | undefined {
  if (!declared || value === null) return undefined;
  return Object.fromEntries(Object.entries(declared.of(value)).filter(([, n]) => Number.isFinite(n)));
}
