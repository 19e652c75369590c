// The evaluation's hotspots and flake graph (worker.eval.metrics, docs/metrics.md): call counts are
// summed over an evaluation's `nix eval` runs and cut to the most called; worker paths never show
// in full; statistics Nix wrote badly cost the numbers, never the evaluation; a hostile flake.lock
// gives a bounded graph. jobStatistics.test.ts sees the same with real Nix.
import t from 'tap';
import { writeFile } from 'node:fs/promises';
import { EvalStats, FLAKE_GRAPH_MAX_NODES } from '../../protocol/index.js';
import { EvalStatsCollector } from '../../worker/evalStats.js';
import { HotspotCounter, TOP_FUNCTIONS, TOP_PRIMOPS } from '../../worker/evalHotspots.js';
import { flakeGraphOf } from '../../worker/flakeGraph.js';
import type { FlakeLocks } from '../../worker/flakeInputPolicy.js';

const SOURCE = '/nix/store/wfg5wrdfsx9ggqh3650gklwqbrawgm5l-source';
const fn = (name: string | null, file: string, line: number, count: number) => ({ name, file, line, column: 3, count });

t.test('counts are summed over runs, most called first, cut to the top', async (t) => {
  const counter = new HotspotCounter();
  counter.setFlakeSource(SOURCE);
  counter.add({ functions: [fn('f', `${SOURCE}/flake.nix`, 1, 10), fn('g', `${SOURCE}/lib/g.nix`, 4, 3)], primops: { map: 5, sub: 1 } });
  counter.add({ functions: [fn('g', `${SOURCE}/lib/g.nix`, 4, 30)], primops: { sub: 9 } });
  t.same(counter.top(), {
    functions: [{ name: 'g', file: 'lib/g.nix', line: 4, count: 33 }, { name: 'f', file: 'flake.nix', line: 1, count: 10 }],
    primOps: [{ name: 'sub', count: 10 }, { name: 'map', count: 5 }],
  });

  const many = new HotspotCounter();
  for (let run = 0; run < 3; run++) {
    many.add({
      functions: Array.from({ length: 3000 }, (_, i) => fn(`f${i}`, '/nix/store/x-source/a.nix', i, i)),
      primops: Object.fromEntries(Array.from({ length: 200 }, (_, i) => [`p${i}`, i])),
    });
  }
  const top = many.top()!;
  t.equal(top.functions.length, TOP_FUNCTIONS);
  t.equal(top.primOps.length, TOP_PRIMOPS);
  t.same(top.functions[0], { name: 'f2999', file: '/nix/store/x-source/a.nix', line: 2999, count: 3 * 2999 }, 'the most called, summed');
  t.same(top.primOps[0], { name: 'p199', count: 3 * 199 });
  t.equal(EvalStats.shape.hotspots.safeParse(top).success, true, 'the protocol carries it');
});

t.test('worker paths are relative; other host paths and inline text are withheld', async (t) => {
  const counter = new HotspotCounter();
  counter.hidePrefix('/var/lib/kiln-worker/repos/p/clone');
  counter.hidePrefix('/var/lib/kiln-worker');
  counter.add({
    functions: [
      fn('a', '/var/lib/kiln-worker/repos/p/clone/flake.nix', 1, 5),
      fn('b', '/var/lib/kiln-worker/other/x.nix', 2, 4),
      fn('c', '/etc/secret.nix', 3, 3),
      fn('d', '\nlockFileStr: rootSrc: rootSubdir:\n\nlet\n', 4, 2),
      fn(null, '/nix/store/y-source/default.nix', 5, 1),
    ],
  });
  t.same(counter.top()!.functions.map((f) => f.file), ['flake.nix', 'other/x.nix', null, null, '/nix/store/y-source/default.nix']);
});

t.test('statistics Nix wrote badly cost the numbers, never the evaluation', async (t) => {
  const collector = await EvalStatsCollector.open();
  t.teardown(() => collector.close());
  const runWriting = (text: string) => collector.around({}, async (env) => {
    await writeFile(env['NIX_SHOW_STATS_PATH']!, text);
    t.equal(env['NIX_COUNT_CALLS'], '1', 'Nix is asked to count calls');
    return 'evaluated';
  });
  t.equal(await runWriting('{"nrThunks": 3, "functions": '), 'evaluated', 'unreadable JSON: the run still returns');
  t.equal(collector.stats(), null, 'and is not counted');
  t.equal(await runWriting(JSON.stringify({
    nrThunks: 3,
    functions: [{ name: 5, count: 'many' }, fn('ok', `${SOURCE}/flake.nix`, 1, 2), null, { count: -1 }, { name: 'x'.repeat(10_000), count: 1 }],
    primops: { good: 4, bad: 'x', negative: -2 },
  })), 'evaluated');
  t.equal(await runWriting(JSON.stringify({ nrThunks: 1, functions: 'not a list', primops: [1, 2] })), 'evaluated');
  const stats = collector.stats();
  t.equal(stats?.runs, 2);
  t.equal(stats?.thunks, 4);
  t.same(stats?.hotspots?.functions.map((f) => [f.name?.length, f.count]), [[2, 2], [256, 1]], 'the readable entries, names cut');
  t.same(stats?.hotspots?.primOps, [{ name: 'good', count: 4 }]);
  t.equal(EvalStats.safeParse(stats).success, true, 'what is sent passes the protocol');
});

const github = (repo: string) => ({ type: 'github', owner: 'o', repo, rev: 'a'.repeat(40), lastModified: 1700000000, narHash: 'sha256-x' });

t.test('the flake graph: nodes, edges and follows', async (t) => {
  const lock: FlakeLocks = {
    root: 'root',
    nodes: {
      root: { inputs: { nixpkgs: 'nixpkgs', utils: 'utils' } },
      nixpkgs: { locked: github('nixpkgs') },
      utils: { inputs: { nixpkgs: ['nixpkgs'] }, locked: { type: 'tarball', url: 'https://example.org/u.tar.gz', narHash: 'sha256-y' } },
    },
  };
  t.same(flakeGraphOf(lock), {
    root: 'root',
    nodes: [
      { id: 'root', type: null, source: null, rev: null, lastModified: null },
      { id: 'nixpkgs', type: 'github', source: 'o/nixpkgs', rev: 'a'.repeat(40), lastModified: 1700000000 },
      { id: 'utils', type: 'tarball', source: 'https://example.org/u.tar.gz', rev: null, lastModified: null },
    ],
    edges: [
      { from: 'root', to: 'nixpkgs', input: 'nixpkgs' },
      { from: 'root', to: 'utils', input: 'utils' },
      { from: 'utils', to: 'nixpkgs', input: 'nixpkgs' },
    ],
    truncated: false,
  });
});

t.test('a hostile flake.lock gives a bounded graph', async (t) => {
  const nodes: FlakeLocks['nodes'] = { root: { inputs: { a: ['b'], b: ['a'], c: 'c0' } } };
  for (let i = 0; i < 2 * FLAKE_GRAPH_MAX_NODES; i++) nodes[`c${i}`] = { inputs: { next: `c${i + 1}`, loop: ['a'] }, locked: { ...github(`r${i}`), lastModified: -1 } };
  const graph = flakeGraphOf({ root: 'root', nodes });
  t.equal(graph.truncated, true);
  t.equal(graph.nodes.length, FLAKE_GRAPH_MAX_NODES);
  t.notOk(graph.edges.some((e) => e.input === 'a' || e.input === 'loop'), 'a cycle of follows leads nowhere');
  t.equal(graph.nodes[1]!.lastModified, null, 'a negative lastModified is no time');
  t.equal(EvalStats.shape.flakeGraph.safeParse(graph).success, true, 'the protocol carries it');
});
