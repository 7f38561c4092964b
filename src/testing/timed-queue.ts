/*
 * The node lifecycle controller's UniqueQueue (pkg/controller/nodelifecycle/scheduler/rate_limited_queue.go) as it
 * behaves: a binary heap by processAt (container/heap, ties in no set order) beside a set of names. The set, not the
 * heap, keeps a name from being added twice: SetRemove drops a name from the set only, so the next Add pushes a second
 * entry while the first stays in the heap. Remove and RemoveFromQueue take out the first entry of the name in the
 * heap's array, which is the head when the name is at the head.
 */

export interface TimedEntry {
  name: string;
  at: number;
}

export class TimedQueue {
  private readonly set = new Set<string>();
  private readonly heap: TimedEntry[] = [];

  get size(): number {
    return this.heap.length;
  }

  has(name: string): boolean {
    return this.set.has(name);
  }

  head(): TimedEntry | undefined {
    return this.heap[0];
  }

  /** Add: nothing when the set holds the name. */
  add(name: string, at: number): boolean {
    if (this.set.has(name)) return false;
    this.set.add(name);
    this.heap.push({ name, at });
    this.up(this.heap.length - 1);
    return true;
  }

  /** SetRemove: off the set only; its entries stay in the heap. */
  setRemove(name: string): void {
    this.set.delete(name);
  }

  /** Remove: off the set, and its first entry off the heap. */
  remove(name: string): boolean {
    if (!this.set.delete(name)) return false;
    this.removeFirst(name);
    return true;
  }

  /** RemoveFromQueue: its first entry off the heap, kept in the set; nothing when the set does not hold it. */
  removeFromQueue(name: string): boolean {
    return this.set.has(name) && this.removeFirst(name);
  }

  private removeFirst(name: string): boolean {
    const i = this.heap.findIndex((e) => e.name === name);
    if (i < 0) return false;
    const n = this.heap.length - 1;
    if (n !== i) {
      this.swap(i, n);
      if (!this.down(i, n)) this.up(i);
    }
    this.heap.pop();
    return true;
  }

  private less(i: number, j: number): boolean {
    return this.heap[i]!.at < this.heap[j]!.at;
  }

  private swap(i: number, j: number): void {
    const h = this.heap;
    [h[i], h[j]] = [h[j]!, h[i]!];
  }

  private up(j: number): void {
    while (j > 0) {
      const i = (j - 1) >> 1;
      if (!this.less(j, i)) break;
      this.swap(i, j);
      j = i;
    }
  }

  private down(i0: number, n: number): boolean {
    let i = i0;
    for (;;) {
      const j1 = 2 * i + 1;
      if (j1 >= n) break;
      const j = j1 + 1 < n && this.less(j1 + 1, j1) ? j1 + 1 : j1;
      if (!this.less(j, i)) break;
      this.swap(i, j);
      i = j;
    }
    return i > i0;
  }
}
