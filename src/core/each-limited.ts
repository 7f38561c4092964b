/** Runs `fn` over items with at most `limit` at once. */
export async function eachLimited<T>(items: T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  // by index, not by what the items are: an undefined item (a cluster-wide action's one target) is an item too
  let next = 0;
  const errors: unknown[] = [];
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) {
        const item = items[next++] as T;
        try {
          await fn(item);
        } catch (e) {
          errors.push(e);
        }
      }
    }),
  );
  if (errors.length) throw errors[0];
}
