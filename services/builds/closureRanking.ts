// The largest nodes of a closure by accumulated closure size (a node's own size plus that of
// everything it depends on, each counted once). Computing that size for every node is quadratic
// (every (node, dependency) pair), which measured 11 s in PostgreSQL for 3,000 derivations. Only
// the top `limit` are needed, and a node's closure contains its dependencies' closures, so a
// dependency is never larger than what depends on it: a best-first walk from the roots that
// measures only the dependencies of nodes already taken finds the same top (ties are broken
// toward the roots). The measurements are batched: closureMeasure.ts measures up to 128 nodes in
// one pass over the closure.
import { BATCH, batchMeasurer, topologicalOrder } from './closureMeasure.js';

export interface RankInput {
  /** each node's own size (0 when unknown) */
  sizes: Float64Array;
  /** CSR adjacency: node i depends on deps[offsets[i] .. offsets[i + 1]) */
  offsets: Int32Array;
  deps: Int32Array;
  roots: number[];
}

/** CSR adjacency of `n` nodes from edges given as two lists (target depends on source): node → what it depends on. */
export function dependencyLists(n: number, sources: ArrayLike<number>, targets: ArrayLike<number>): { offsets: Int32Array; deps: Int32Array } {
  const offsets = new Int32Array(n + 1);
  for (let k = 0; k < targets.length; k++) offsets[targets[k]! + 1] = offsets[targets[k]! + 1]! + 1;
  for (let i = 0; i < n; i++) offsets[i + 1] = offsets[i + 1]! + offsets[i]!;
  const fill = offsets.slice(0, n);
  const deps = new Int32Array(sources.length);
  for (let k = 0; k < sources.length; k++) {
    const target = targets[k]!;
    deps[fill[target]!] = sources[k]!;
    fill[target] = fill[target]! + 1;
  }
  return { offsets, deps };
}

/** Indices of the `limit` nodes with the largest accumulated closure size, largest first, with their sizes. */
export function largestClosures(input: RankInput, limit: number): { index: number; size: number }[] {
  const { offsets, deps, roots } = input;
  const n = input.sizes.length;
  const measure = measurer(input);
  const heap = new MaxHeap();
  const queued = new Uint8Array(n);
  const pending: number[] = [];
  for (const r of roots) {
    if (queued[r]) continue;
    queued[r] = 1;
    pending.push(r);
  }
  for (const r of pending) heap.push(measure(r, pending), r);
  const taken: { index: number; size: number }[] = [];
  while (taken.length < limit && heap.size > 0) {
    const { size, index } = heap.pop();
    taken.push({ index, size });
    const children: number[] = [];
    for (let k = offsets[index]!; k < offsets[index + 1]!; k++) {
      const v = deps[k]!;
      if (queued[v]) continue;
      queued[v] = 1;
      children.push(v);
    }
    for (const v of children) heap.push(measure(v, children), v);
  }
  return taken;
}

/**
 * The closure size of a node, measured when first asked (`next`: nodes likely asked soon, measured
 * in the same pass). In a graph without cycles a pass measures BATCH nodes: those asked, then the
 * next unmeasured in breadth-first order from the roots, where the ranking's candidates lie (the
 * largest closures are those of the roots and what they depend on first). A measurement is exact
 * whoever shares its pass, so which are guessed changes the cost, never the answer.
 */
function measurer({ sizes, offsets, deps, roots }: RankInput): (node: number, next: readonly number[]) => number {
  const n = sizes.length;
  const order = topologicalOrder({ offsets, deps }, n);
  if (!order) {
    // one stamp array for every walk of the request (a walk's generation marks what it has seen)
    const seen = new Uint32Array(n);
    let generation = 0;
    return (node) => walkSize({ sizes, offsets, deps }, node, seen, ++generation);
  }
  const pass = batchMeasurer({ sizes, offsets, deps }, order);
  const known = new Float64Array(n).fill(-1);
  const guesses = breadthFirst({ offsets, deps }, n, roots);
  let cursor = 0;
  return (node, next) => {
    if (known[node]! >= 0) return known[node]!;
    const batch = [node];
    const chosen = new Set(batch);
    for (const v of next) {
      if (batch.length === BATCH) break;
      if (known[v]! >= 0 || chosen.has(v)) continue;
      batch.push(v);
      chosen.add(v);
    }
    for (; cursor < guesses.length && batch.length < BATCH; cursor++) {
      const v = guesses[cursor]!;
      if (known[v]! >= 0 || chosen.has(v)) continue;
      batch.push(v);
      chosen.add(v);
    }
    const measured = pass(batch);
    batch.forEach((v, j) => (known[v] = measured[j]!));
    return known[node]!;
  };
}

/** The nodes reachable from `roots` in breadth-first order. */
function breadthFirst({ offsets, deps }: Omit<RankInput, 'sizes' | 'roots'>, n: number, roots: readonly number[]): Int32Array {
  const seen = new Uint8Array(n);
  const found = new Int32Array(n);
  let tail = 0;
  for (const r of roots) {
    if (seen[r]) continue;
    seen[r] = 1;
    found[tail++] = r;
  }
  for (let head = 0; head < tail; head++) {
    const u = found[head]!;
    for (let k = offsets[u]!; k < offsets[u + 1]!; k++) {
      const v = deps[k]!;
      if (seen[v]) continue;
      seen[v] = 1;
      found[tail++] = v;
    }
  }
  return found.subarray(0, tail);
}

/** One node's closure size by walking it (the fallback for a graph with a cycle). */
function walkSize({ sizes, offsets, deps }: Omit<RankInput, 'roots'>, start: number, seen: Uint32Array, generation: number): number {
  const stack = [start];
  seen[start] = generation;
  let total = 0;
  while (stack.length > 0) {
    const u = stack.pop()!;
    total += sizes[u]!;
    for (let k = offsets[u]!; k < offsets[u + 1]!; k++) {
      const v = deps[k]!;
      if (seen[v] === generation) continue;
      seen[v] = generation;
      stack.push(v);
    }
  }
  return total;
}

/** A binary max-heap of (size, index); equal sizes come out in insertion order (nearer the roots first). */
class MaxHeap {
  private readonly items: { size: number; index: number; order: number }[] = [];
  private count = 0;

  get size(): number {
    return this.items.length;
  }

  push(size: number, index: number): void {
    this.items.push({ size, index, order: this.count++ });
    let i = this.items.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.before(i, parent)) break;
      this.swap(i, parent);
      i = parent;
    }
  }

  pop(): { size: number; index: number } {
    const top = this.items[0]!;
    const last = this.items.pop()!;
    if (this.items.length > 0) {
      this.items[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let best = i;
        if (l < this.items.length && this.before(l, best)) best = l;
        if (r < this.items.length && this.before(r, best)) best = r;
        if (best === i) break;
        this.swap(i, best);
        i = best;
      }
    }
    return { size: top.size, index: top.index };
  }

  private before(a: number, b: number): boolean {
    const x = this.items[a]!;
    const y = this.items[b]!;
    return x.size > y.size || (x.size === y.size && x.order < y.order);
  }

  private swap(a: number, b: number): void {
    const t = this.items[a]!;
    this.items[a] = this.items[b]!;
    this.items[b] = t;
  }
}
