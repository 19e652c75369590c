// Accumulated closure sizes of many nodes at once, for closureRanking.ts: one pass over the
// closure in topological order carries a bit per measured node (BATCH of them, in WORDS 32-bit
// words per node) from each node to what it depends on, so a node's bits say which measured
// nodes reach it, and its size is added to theirs. One pass costs about one walk of the closure
// (every edge, WORDS words each) whatever the batch holds, where measuring each node alone walks
// its own closure: a best-first ranking of 500 nodes measures ~2,000, mostly of the whole closure.
// Sizes are whole bytes, so the sums are exact in any order (below 2^53).

const WORDS = 4;
/** How many nodes one pass measures. */
export const BATCH = WORDS * 32;

interface Dag {
  sizes: Float64Array;
  offsets: Int32Array;
  deps: Int32Array;
}

/** A topological order (every node before what it depends on), or undefined if the graph has a cycle. */
export function topologicalOrder({ offsets, deps }: Omit<Dag, 'sizes'>, n: number): Int32Array | undefined {
  const parents = new Int32Array(n);
  for (let k = 0; k < deps.length; k++) parents[deps[k]!] = parents[deps[k]!]! + 1;
  const order = new Int32Array(n);
  let tail = 0;
  for (let i = 0; i < n; i++) if (parents[i] === 0) order[tail++] = i;
  for (let head = 0; head < tail; head++) {
    const u = order[head]!;
    for (let k = offsets[u]!; k < offsets[u + 1]!; k++) {
      const v = deps[k]!;
      parents[v] = parents[v]! - 1;
      if (parents[v] === 0) order[tail++] = v;
    }
  }
  return tail === n ? order : undefined;
}

/** Measures closures of up to BATCH nodes per call along a fixed topological order. */
export function batchMeasurer(dag: Dag, order: Int32Array) {
  const { sizes, offsets, deps } = dag;
  const n = sizes.length;
  const place = new Int32Array(n);
  for (let p = 0; p < n; p++) place[order[p]!] = p;
  const masks = new Int32Array(n * WORDS);
  const totals = new Float64Array(BATCH);
  const full = new Float64Array(WORDS);

  /** The closure size of each of `nodes` (at most BATCH), in their order. */
  return (nodes: readonly number[]): Float64Array => {
    totals.fill(0);
    full.fill(0);
    let start = n;
    nodes.forEach((node, j) => {
      masks[node * WORDS + (j >> 5)] = masks[node * WORDS + (j >> 5)]! | (1 << (j & 31));
      start = Math.min(start, place[node]!);
    });
    for (let p = start; p < n; p++) {
      const u = order[p]!;
      const at = u * WORDS;
      if ((masks[at]! | masks[at + 1]! | masks[at + 2]! | masks[at + 3]!) === 0) continue;
      const size = sizes[u]!;
      for (let w = 0; w < WORDS; w++) {
        let m = masks[at + w]!;
        if (m === -1) {
          full[w] = full[w]! + size;
          continue;
        }
        while (m !== 0) {
          const low = m & -m;
          const j = (w << 5) + 31 - Math.clz32(low);
          totals[j] = totals[j]! + size;
          m ^= low;
        }
      }
      for (let k = offsets[u]!; k < offsets[u + 1]!; k++) {
        const to = deps[k]! * WORDS;
        masks[to] = masks[to]! | masks[at]!;
        masks[to + 1] = masks[to + 1]! | masks[at + 1]!;
        masks[to + 2] = masks[to + 2]! | masks[at + 2]!;
        masks[to + 3] = masks[to + 3]! | masks[at + 3]!;
      }
      masks[at] = 0;
      masks[at + 1] = 0;
      masks[at + 2] = 0;
      masks[at + 3] = 0;
    }
    return Float64Array.from(nodes, (_, j) => totals[j]! + full[j >> 5]!);
  };
}
