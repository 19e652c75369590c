// The largest closures (services/builds/closureRanking.ts, docs/builds.md "Graph, closures and
// products"): the batched measurement (closureMeasure.ts, up to 128 nodes per pass over the
// closure) must pick the same nodes, with the same sizes and in the same order, as measuring each
// candidate by walking its own closure. Graphs here are random DAGs large enough for several
// passes, with many equal sizes (ties go toward the roots), and a graph with a cycle (the walk fallback).
import t from 'tap';
import { dependencyLists, largestClosures, type RankInput } from '../../../services/builds/closureRanking.js';

/** The ranking measured one candidate at a time by walking its closure (the definition). */
function reference({ sizes, offsets, deps, roots }: RankInput, limit: number): { index: number; size: number }[] {
  const closureSize = (start: number) => {
    const seen = new Set([start]);
    const stack = [start];
    let total = 0;
    while (stack.length > 0) {
      const u = stack.pop()!;
      total += sizes[u]!;
      for (let k = offsets[u]!; k < offsets[u + 1]!; k++) if (!seen.has(deps[k]!)) seen.add(deps[k]!), stack.push(deps[k]!);
    }
    return total;
  };
  const queue: { size: number; index: number; order: number }[] = [];
  const queued = new Set<number>();
  const add = (v: number) => {
    if (queued.has(v)) return;
    queued.add(v);
    queue.push({ size: closureSize(v), index: v, order: queue.length + taken.length });
  };
  const taken: { index: number; size: number }[] = [];
  for (const r of roots) add(r);
  while (taken.length < limit && queue.length > 0) {
    queue.sort((a, b) => b.size - a.size || a.order - b.order);
    const { index, size } = queue.shift()!;
    taken.push({ index, size });
    for (let k = offsets[index]!; k < offsets[index + 1]!; k++) add(deps[k]!);
  }
  return taken;
}

/** A seeded generator (mulberry32) so a failure can be replayed. */
function random(seed: number) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let x = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

function graph(n: number, seed: number, sizeOf: (i: number, r: () => number) => number, roots: number[]): RankInput {
  const r = random(seed);
  const sources: number[] = [];
  const targets: number[] = [];
  for (let i = 0; i < n; i++) {
    const inputs = new Set<number>();
    for (let k = 0; k < 4; k++) {
      const j = r() < 0.8 ? i + 1 + Math.floor(r() * 30) : n - 1 - Math.floor(r() * 10);
      if (j > i && j < n) inputs.add(j);
    }
    for (const j of inputs) sources.push(j), targets.push(i);
  }
  const sizes = Float64Array.from({ length: n }, (_, i) => sizeOf(i, r));
  return { sizes, ...dependencyLists(n, sources, targets), roots };
}

t.test('the batched ranking equals measuring each candidate alone', async (t) => {
  const cases: [string, RankInput, number][] = [
    ['distinct sizes, one root', graph(3000, 1, (_, r) => 1000 + Math.floor(r() * 65536), [0]), 500],
    ['many equal sizes (ties toward the roots)', graph(3000, 2, (_, r) => (r() < 0.5 ? 0 : 1000 * (1 + Math.floor(r() * 3))), [0]), 500],
    ['every size 0 (nothing recorded)', graph(2000, 3, () => 0, [0]), 500],
    ['many roots, some repeated (an evaluation\'s entry points)', graph(4000, 4, (_, r) => Math.floor(r() * 1e9), [0, 7, 300, 7, 1200, 2500, 0, 3999]), 500],
    ['fewer nodes than the limit', graph(300, 5, (_, r) => Math.floor(r() * 100), [0, 1, 2]), 500],
    ['large sizes (sums past 2^32)', graph(3000, 6, (_, r) => Math.floor(r() * 2 ** 40), [0]), 500],
  ];
  for (const [name, input, limit] of cases) {
    const got = largestClosures(input, limit);
    const want = reference(input, limit);
    t.equal(got.length, want.length, `${name}: as many taken`);
    t.same(got, want, `${name}: the same nodes, sizes and order`);
  }
});

t.test('a graph with a cycle is measured by walks, and the answer is the same', async (t) => {
  // 0 → 1 → 2 → 3 → 1 (a cycle), 0 → 4; 2 → 5
  const sources = [1, 2, 3, 1, 4, 5];
  const targets = [0, 1, 2, 3, 0, 2];
  const input: RankInput = { sizes: Float64Array.from([10, 20, 30, 40, 50, 60]), ...dependencyLists(6, sources, targets), roots: [0] };
  const got = largestClosures(input, 500);
  t.same(got, reference(input, 500));
  t.same(got.map((x) => x.size), [210, 150, 150, 150, 60, 50]);
});
