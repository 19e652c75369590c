// The build data endpoints on a real server over rows seeded with SQL: NDJSON of an evaluation's
// logs, the live log, the dependency graph, build products served out of cached NARs, and the
// closure views (small and exact, and a synthetic graph past the 500-node cut).
import t from 'tap';
import { randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { Sql } from 'postgres';
import { hashNar } from '../../../../protocol/index.js';
import { dumpNar } from '../../../../worker/index.js';
import { signUp } from '../../../support/accounts.js';
import { createTestCache } from '../../../support/caches.js';
import { startTestKiln, type TestKiln } from '../../../support/kiln.js';
import { insertProject } from '../../../support/modelRows.js';
import { numberFromEdges } from '../../../../services/builds/derivationNumbers.js';

const NIX32 = '0123456789abcdfghijklmnpqrsvwxyz';
/** A valid, distinct hash part per number. */
const hashPart = (n: number) => n.toString().padStart(6, '0') + Array.from({ length: 26 }, (_, i) => NIX32[(n * 7 + i * 13) % 32]).join('');
const storePath = (n: number, name: string) => `/nix/store/${hashPart(n)}-${name}`;

interface Seed {
  evaluation: string;
  /** build ids by name */
  builds: Record<string, string>;
  derivations: Record<string, string>;
  derivationBuilds: Record<string, string>;
}

/** An evaluation of project acme/web with derivations `name → inputs`, all recorded like graphRecorder does. */
async function seedEvaluation(sql: Sql, projectId: string, graph: Record<string, { deps: string[]; out: string; status?: string; entry?: boolean }>): Promise<Seed> {
  const [task] = await sql<{ id: string }[]>`
    insert into tasks (project_id, name) values (${projectId}, 'default') on conflict (project_id, name) do update set name = excluded.name returning id`;
  const [evaluation] = await sql<{ id: string }[]>`
    insert into evaluations (task_id, repository, wildcard, phase) values (${task!.id}, 'file:///x', 'packages.*', 'building') returning id`;
  const seed: Seed = { evaluation: evaluation!.id, builds: {}, derivations: {}, derivationBuilds: {} };
  const names = Object.keys(graph);
  const drvs = await sql<{ id: string; name: string }[]>`insert into derivations ${sql(names.map((name, i) => ({
    drv_path: `/nix/store/${hashPart(900_000 + i)}-${name}.drv`, name, system: 'x86_64-linux', outputs: sql.json({ out: graph[name]!.out }),
  })))} returning id, name`;
  for (const d of drvs) seed.derivations[d.name] = d.id;
  const dbs = await sql<{ id: string; derivation_id: string }[]>`insert into derivation_builds ${sql(names.map((name) => ({
    derivation_id: seed.derivations[name]!, attempts: 1,
  })))} returning id, derivation_id`;
  // Recorded queued, then finished, as the scheduler moves them: finishing records the outputs' sizes (migration 0052).
  const statuses = dbs.map((d) => graph[drvs.find((x) => x.id === d.derivation_id)!.name]!.status ?? 'completed');
  await sql`update derivation_builds b set status = s.status from unnest(${dbs.map((d) => d.id)}::uuid[], ${statuses}::text[]) s(id, status) where b.id = s.id`;
  const nameOf = new Map(drvs.map((d) => [d.id, d.name]));
  for (const d of dbs) seed.derivationBuilds[nameOf.get(d.derivation_id)!] = d.id;
  const builds = await sql<{ id: string; derivation_build_id: string }[]>`insert into builds ${sql(names.map((name) => ({
    evaluation_id: seed.evaluation, derivation_build_id: seed.derivationBuilds[name]!, entry_point: graph[name]!.entry ?? false,
    attr: graph[name]!.entry ? `packages.${name}` : null,
  })))} returning id, derivation_build_id`;
  const byDerivationBuild = new Map(Object.entries(seed.derivationBuilds).map(([name, id]) => [id, name]));
  for (const b of builds) seed.builds[byDerivationBuild.get(b.derivation_build_id)!] = b.id;
  const edges = names.flatMap((name) => graph[name]!.deps.map((dep) => ({ derivation_id: seed.derivations[name]!, depends_on: seed.derivations[dep]! })));
  if (edges.length > 0) await sql`insert into derivation_edges ${sql(edges)}`;
  await numberFromEdges(sql, Object.values(seed.derivations));
  return seed;
}

/** cached_paths rows for the hash parts from..from+count-1 (sizes and references as given; no blob behind them). */
function cachedRows(from: number, count: number, refs: (i: number) => string[], sizeOf: (i: number) => number) {
  const fakeListing = '{"version":1,"root":{"type":"regular","size":1,"narOffset":0}}';
  return Array.from({ length: count }, (_, k) => {
    const i = from + k;
    return {
      hash_part: hashPart(i), store_path: storePath(i, `p${i}`), nar_hash: `sha256:${'0'.repeat(52)}`, nar_size: sizeOf(i), refs: refs(i),
      file_hash: hashPart(i) + hashPart(i).slice(0, 20), file_size: 1, listing: fakeListing,
    };
  });
}

/** The rows, signed into `cacheId`. */
async function insertCached(sql: Sql, cacheId: string, rows: ReturnType<typeof cachedRows>): Promise<void> {
  const ids = await sql<{ id: string; hash_part: string }[]>`insert into cached_paths ${sql(rows)} returning id, hash_part`;
  await sql`insert into path_signatures ${sql(ids.map((r) => ({ cache_id: cacheId, hash_part: r.hash_part, cached_path_id: r.id, signature: 'k:x' })))}`;
}

/** Uploads a directory tree as the store path `path` into `cache` through the REST API. */
async function uploadTree(kiln: TestKiln, token: string, cache: string, path: string, files: Record<string, string>, references: string[] = []): Promise<number> {
  const dir = await mkdtemp(join(tmpdir(), 'kiln-products-'));
  try {
    for (const [file, text] of Object.entries(files)) {
      await mkdir(dirname(join(dir, 'root', file)), { recursive: true });
      await writeFile(join(dir, 'root', file), text);
    }
    const chunks: Uint8Array[] = [];
    for await (const c of dumpNar(join(dir, 'root'))) chunks.push(Buffer.from(c));
    const nar = Buffer.concat(chunks);
    const digest = await hashNar([nar]);
    const hash = path.slice('/nix/store/'.length, '/nix/store/'.length + 32);
    const headers = { authorization: `Bearer ${token}` };
    const put = await fetch(`${kiln.url}/api/v1/caches/${cache}/nars/${hash}/chunk?offset=0`, { method: 'PUT', headers, body: nar });
    if (put.status !== 200) throw new Error(`chunk: ${put.status} ${await put.text()}`);
    const done = await kiln.api('POST', `/caches/${cache}/nars/${hash}/finalize`, {
      token, body: { store_path: path, nar_hash: digest.narHash, nar_size: digest.narSize, references },
    });
    if (done.status !== 200) throw new Error(`finalize: ${done.status} ${JSON.stringify(done.message)}`);
    return digest.narSize;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

const post = (kiln: TestKiln, path: string, token: string) => fetch(`${kiln.url}/api/v1${path}`, { method: 'POST', headers: { authorization: `Bearer ${token}` } });

t.test('build data endpoints', async (t) => {
  const kiln = await startTestKiln(t);
  const ada = await signUp(kiln, 'ada');
  const eve = await signUp(kiln, 'eve');
  const projectId = await insertProject(kiln.sql, 'acme', 'web');
  await kiln.sql`insert into organization_members (organization_id, user_id, role) select organization_id, ${ada.id}, 'Admin' from projects where id = ${projectId}`;
  const cache = await createTestCache(kiln.sql, 'main', { ownerId: ada.id });
  await kiln.sql`insert into subscriptions (project_id, cache_id, mode) values (${projectId}, ${cache.id}, 0)`;

  const app = storePath(1, 'app');
  const lib = storePath(2, 'lib');
  const libSize = await uploadTree(kiln, ada.token, 'main', lib, { 'lib/libx.so': 'elf' });
  const appSize = await uploadTree(kiln, ada.token, 'main', app, {
    'bin/app': `#!/bin/sh\nexec ${lib}/lib/libx.so\n`,
    'dist/app.tar.gz': 'a tarball',
    'nix-support/hydra-build-products': [
      `file binary-dist ${app}/dist/app.tar.gz`,
      `file binary ${app}/bin/app`,
      `doc manual ${app}/share/doc`,
      'file evil /etc/passwd',
      `file evil ${app}/../x`,
      'not a product line',
      '',
    ].join('\n'),
  }, [`${hashPart(2)}-lib`]);
  const seed = await seedEvaluation(kiln.sql, projectId, {
    app: { deps: ['lib'], out: app, entry: true },
    lib: { deps: ['base'], out: lib },
    base: { deps: [], out: storePath(3, 'base'), status: 'failed' },
    tool: { deps: ['base'], out: storePath(4, 'tool'), entry: true },
  });
  const chunk = (name: string, attempt: number, seq: number, text: string) =>
    kiln.sql`insert into build_log_chunks (derivation_build_id, attempt, seq, data) values (${seed.derivationBuilds[name]!}, ${attempt}, ${seq}, ${Buffer.from(text)})`;
  await chunk('lib', 1, 0, 'lib line 1\n');
  await chunk('lib', 1, 1, 'lib line 2 ✓\n');
  await chunk('app', 1, 0, 'app attempt 1\n');
  await chunk('app', 2, 0, 'app attempt 2\n');

  t.test('POST /evals/{id}/builds streams every stored log as NDJSON', async (t) => {
    const res = await post(kiln, `/evals/${seed.evaluation}/builds`, ada.token);
    t.equal(res.status, 200);
    t.match(res.headers.get('content-type'), /application\/x-ndjson/);
    const lines = (await res.text()).trimEnd().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    const byBuild = (name: string) => lines.filter((l) => l['build_id'] === seed.builds[name]);
    t.same(byBuild('lib').map((l) => [l['type'], l['log'] ?? l['status']]), [['log', 'lib line 1\n'], ['log', 'lib line 2 ✓\n'], ['end', 'completed']]);
    t.same(byBuild('app').map((l) => [l['type'], l['attempt'] ?? l['status']]), [['log', 1], ['log', 2], ['end', 'completed']]);
    t.same(byBuild('base').map((l) => [l['type'], l['status']]), [['end', 'failed']], 'a build without a log still has its end line');
    t.equal(lines.length, 8);
    t.equal((await post(kiln, `/evals/${seed.evaluation}/builds`, eve.token)).status, 404, 'a stranger learns nothing');
    t.equal((await post(kiln, `/evals/${randomUUID()}/builds`, ada.token)).status, 404);
    t.equal((await post(kiln, '/evals/nope/builds', ada.token)).status, 400);
  });

  t.test('POST /builds/{id}/log follows the log until the build is final', async (t) => {
    await kiln.sql`update derivation_builds set status = 'started', attempts = 1 where id = ${seed.derivationBuilds['tool']!}`;
    await chunk('tool', 1, 0, 'first\n');
    const res = await post(kiln, `/builds/${seed.builds['tool']}/log`, ada.token);
    t.equal(res.status, 200);
    const reader = res.body!.getReader();
    let text = '';
    while (!text.includes('first\n')) text += Buffer.from((await reader.read()).value!).toString();
    await chunk('tool', 1, 1, 'second\n');
    await kiln.sql`update derivation_builds set status = 'completed' where id = ${seed.derivationBuilds['tool']!}`;
    for (;;) {
      const next = await reader.read();
      if (next.done) break;
      text += Buffer.from(next.value).toString();
    }
    t.equal(text, 'first\nsecond\n', 'what was stored, then what came, then the end');
    const done = await post(kiln, `/builds/${seed.builds['app']}/log`, ada.token);
    t.equal(await done.text(), 'app attempt 2\n', 'a finished build: its latest attempt, at once');
    t.equal((await post(kiln, `/builds/${seed.builds['app']}/log`, eve.token)).status, 404);
    t.equal((await post(kiln, '/builds/123/log', ada.token)).status, 400);
  });

  t.test('GET /builds/{id}/graph is the whole dependency graph', async (t) => {
    const res = await kiln.api<{ root: string; nodes: { build_id: string; status: string }[]; edges: { source: string; target: string }[] }>(
      'GET', `/builds/${seed.builds['app']}/graph`, { token: ada.token });
    t.equal(res.status, 200);
    t.equal(res.message.root, seed.builds['app']);
    t.same(res.message.nodes.map((n) => n.build_id).sort(), [seed.builds['app'], seed.builds['lib'], seed.builds['base']].sort());
    t.same(res.message.edges, [
      { source: seed.builds['lib'], target: seed.builds['app'] },
      { source: seed.builds['base'], target: seed.builds['lib'] },
    ].sort((a, b) => (a.target! < b.target! ? -1 : 1)), 'target depends on source');
    t.equal((await kiln.api('GET', `/builds/${seed.builds['app']}/graph`, { token: eve.token })).status, 404);
    t.equal((await kiln.api('GET', `/builds/${randomUUID()}/graph`, { token: ada.token })).status, 404);
    t.equal((await kiln.api('GET', '/builds/x/graph', { token: ada.token })).status, 400);
  });

  t.test('build products come out of the cached output', async (t) => {
    const list = await kiln.api<{ filename: string; type: string; subtype: string; size: number; output: string }[]>(
      'GET', `/builds/${seed.builds['app']}/downloads`, { token: ada.token });
    t.equal(list.status, 200);
    t.same(list.message.map((p) => [p.filename, p.type, p.subtype, p.output, p.size]), [
      ['app.tar.gz', 'file', 'binary-dist', 'out', 9],
      ['app', 'file', 'binary', 'out', `#!/bin/sh\nexec ${lib}/lib/libx.so\n`.length],
    ], 'regular files inside the outputs only: no directory, nothing outside the store path');
    const file = await fetch(`${kiln.url}/api/v1/builds/${seed.builds['app']}/download/app.tar.gz`, { headers: { authorization: `Bearer ${ada.token}` } });
    t.equal(file.status, 200);
    t.equal(file.headers.get('content-type'), 'application/gzip');
    t.match(file.headers.get('content-disposition'), /attachment; filename="app.tar.gz"/);
    t.equal(await file.text(), 'a tarball');
    for (const name of ['passwd', 'x', '..%2F..%2Fetc%2Fpasswd', 'hydra-build-products']) {
      t.equal((await kiln.api('GET', `/builds/${seed.builds['app']}/download/${name}`, { token: ada.token })).status, 404, `${name}: 404`);
    }
    t.equal((await kiln.api('GET', `/builds/${seed.builds['app']}/download/${'a'.repeat(300)}`, { token: ada.token })).status, 400);
    t.equal((await kiln.api('GET', `/builds/${seed.builds['app']}/download/app.tar.gz`, { token: eve.token })).status, 404);
    const none = await kiln.api<unknown[]>('GET', `/builds/${seed.builds['base']}/downloads`, { token: ada.token });
    t.same([none.status, none.message], [200, []], 'an output no cache holds has no products');
  });

  t.test('closures of a build and of an evaluation', async (t) => {
    type Graph = { roots: string[]; total_size_bytes: number; node_count: number; edge_count: number; truncated: boolean; nodes: { id: string; nar_size: number | null }[]; edges: { source: string; target: string }[] };
    const build = await kiln.api<Graph>('GET', `/builds/${seed.builds['app']}/closure`, { token: ada.token });
    t.equal(build.status, 200);
    t.same(build.message.roots, [seed.derivations['app']]);
    t.same([build.message.node_count, build.message.edge_count, build.message.truncated, build.message.total_size_bytes], [3, 2, false, appSize + libSize]);
    t.same(build.message.nodes.map((n) => [n.id, n.nar_size]), [[seed.derivations['app'], appSize], [seed.derivations['lib'], libSize], [seed.derivations['base'], null]],
      'largest accumulated closure first; a derivation with nothing cached has no size');
    t.same(build.message.edges.find((e) => e.target === seed.derivations['app']), { source: seed.derivations['lib'], target: seed.derivations['app'] });

    const runtime = await kiln.api<Graph>('GET', `/builds/${seed.builds['app']}/runtime-closure`, { token: ada.token });
    t.equal(runtime.status, 200);
    t.same(runtime.message.roots, [hashPart(1)]);
    t.same(runtime.message.nodes.map((n) => n.id), [hashPart(1), hashPart(2)]);
    t.same(runtime.message.edges, [{ source: hashPart(2), target: hashPart(1) }]);
    t.equal(runtime.message.total_size_bytes, appSize + libSize);

    const evaluation = await kiln.api<Graph>('GET', `/evals/${seed.evaluation}/closure`, { token: ada.token });
    t.same(new Set(evaluation.message.roots), new Set([seed.derivations['app'], seed.derivations['tool']]), 'the entry points are the roots');
    t.equal(evaluation.message.node_count, 4);
    const evalRuntime = await kiln.api<Graph>('GET', `/evals/${seed.evaluation}/runtime-closure`, { token: ada.token });
    t.same([evalRuntime.message.node_count, evalRuntime.message.total_size_bytes], [3, appSize + libSize], 'tool\'s output is not cached: a node without a size');

    for (const path of [`/builds/${seed.builds['app']}/closure`, `/evals/${seed.evaluation}/runtime-closure`]) {
      t.equal((await kiln.api('GET', path, { token: eve.token })).status, 404, `${path}: a stranger gets 404`);
    }
    t.equal((await kiln.api('GET', `/evals/${randomUUID()}/closure`, { token: ada.token })).status, 404);
    t.equal((await kiln.api('GET', '/evals/1/closure', { token: ada.token })).status, 400);
    t.equal((await kiln.api('GET', '/builds/1/runtime-closure', { token: ada.token })).status, 400);
  });

  t.test('a synthetic graph past the 500-node cut: the largest accumulated closures, exact totals', async (t) => {
    type Graph = { total_size_bytes: number; node_count: number; edge_count: number; truncated: boolean; nodes: { id: string; nar_size: number | null; closure_size: number }[]; edges: { source: string; target: string }[] };
    const N = 700;
    // i needs 2i+1, 2i+2 (a tree) and i+5 (sharing across branches)
    const deps = (i: number) => [...new Set([2 * i + 1, 2 * i + 2, i + 5])].filter((j) => j < N);
    const size = (i: number) => (((i * 37) % 101) + 1) * 100;
    const graph: Record<string, { deps: string[]; out: string; entry?: boolean }> = {};
    for (let i = 0; i < N; i++) graph[`d${i}`] = { deps: deps(i).map((j) => `d${j}`), out: storePath(10_000 + i, `d${i}`), entry: i === 0 };
    await insertCached(kiln.sql, cache.id, cachedRows(10_000, N, () => [], (i) => size(i - 10_000)));
    const synthetic = await seedEvaluation(kiln.sql, projectId, graph);

    // What the server must answer, worked out here by walking every node's closure.
    const closureOf = (i: number, seen = new Set<number>()): Set<number> => {
      if (seen.has(i)) return seen;
      seen.add(i);
      for (const j of deps(i)) closureOf(j, seen);
      return seen;
    };
    const id = (i: number) => synthetic.derivations[`d${i}`]!;
    const ranked = Array.from({ length: N }, (_, i) => ({ i, id: id(i), acc: [...closureOf(i)].reduce((sum, j) => sum + size(j), 0) }))
      .sort((a, b) => b.acc - a.acc || (a.id < b.id ? -1 : 1));
    const top = ranked.slice(0, 500);
    const shown = new Set(top.map((n) => n.i));
    const edgesAll = Array.from({ length: N }, (_, i) => deps(i).map((j) => [i, j] as const)).flat();

    const res = await kiln.api<Graph>('GET', `/builds/${synthetic.builds['d0']}/closure`, { token: ada.token });
    t.equal(res.status, 200);
    t.same([res.message.node_count, res.message.edge_count, res.message.truncated], [N, edgesAll.length, true]);
    t.equal(res.message.total_size_bytes, Array.from({ length: N }, (_, i) => size(i)).reduce((a, b) => a + b, 0), 'total_size_bytes is exact');
    const exact = new Map(ranked.map((n) => [n.id, n.acc]));
    t.same(res.message.nodes.map((n) => n.closure_size), top.map((n) => n.acc), 'the 500 largest accumulated closures, largest first');
    t.ok(res.message.nodes.every((n) => exact.get(n.id) === n.closure_size), 'each with its exact accumulated size');
    t.equal(res.message.edges.length, edgesAll.filter(([a, b]) => shown.has(a) && shown.has(b)).length, 'only the edges between shown nodes');

    // Runtime: a chain of 600 paths, each referring to the next two and to itself.
    const M = 600;
    await insertCached(kiln.sql, cache.id, cachedRows(20_000, M, (i) => [i + 1, i + 2, i].filter((j) => j < 20_000 + M).map((j) => `${hashPart(j)}-p${j}`), () => 1000));
    const chain = await seedEvaluation(kiln.sql, projectId, { head: { deps: [], out: storePath(20_000, 'p20000'), entry: true } });
    const rt = await kiln.api<Graph>('GET', `/evals/${chain.evaluation}/runtime-closure`, { token: ada.token });
    t.equal(rt.status, 200);
    t.same([rt.message.node_count, rt.message.edge_count, rt.message.truncated, rt.message.total_size_bytes], [M, 2 * M - 3, true, M * 1000]);
    t.same(rt.message.nodes.map((n) => n.id), Array.from({ length: 500 }, (_, k) => hashPart(20_000 + k)), 'a chain: the head\'s end of it');
  });

  t.test('build-time closures rank and total by the sizes recorded when builds finished, kept until they change', async (t) => {
    type Graph = { total_size_bytes: number; node_count: number; nodes: { id: string; nar_size: number | null; closure_size: number }[] };
    // top needs mid and side; mid needs leaf. leaf and mid finished with their outputs cached; side and top are queued.
    await insertCached(kiln.sql, cache.id, cachedRows(30_000, 2, () => [], (i) => (i === 30_000 ? 5_000 : 700)));
    const g = await seedEvaluation(kiln.sql, projectId, {
      top: { deps: ['mid', 'side'], out: storePath(30_003, 'top'), status: 'queued', entry: true },
      mid: { deps: ['leaf'], out: storePath(30_001, 'mid') },
      side: { deps: [], out: storePath(30_002, 'side'), status: 'queued' },
      leaf: { deps: [], out: storePath(30_000, 'leaf') },
    });
    const recorded = await kiln.sql<{ name: string; output_nar_size: string | null }[]>`
      select name, output_nar_size::text from derivations where id = any(${Object.values(g.derivations)}::uuid[]) order by name`;
    t.same(recorded.map((r) => [r.name, r.output_nar_size]), [['leaf', '5000'], ['mid', '700'], ['side', null], ['top', null]],
      'finishing a build records its outputs\' size; a queued one has none');

    const view = async () => {
      const res = await kiln.api<Graph>('GET', `/builds/${g.builds['top']}/closure`, { token: ada.token });
      t.equal(res.status, 200);
      return { total: res.message.total_size_bytes, sizes: Object.fromEntries(res.message.nodes.map((n) => [n.id, [n.nar_size, n.closure_size]])) };
    };
    const first = await view();
    t.same(first, { total: 5_700, sizes: {
      [g.derivations['top']!]: [null, 5_700], [g.derivations['mid']!]: [700, 5_700], [g.derivations['leaf']!]: [5_000, 5_000], [g.derivations['side']!]: [null, 0],
    } });
    const [kept] = await kiln.sql<{ node_count: number; sized_count: number }[]>`select node_count, sized_count from closure_summaries where derivation_id = ${g.derivations['top']!}`;
    t.same(kept, { node_count: 4, sized_count: 2 }, 'the view is kept');
    // The kept view answers while nothing in the closure changed (marked here so it shows).
    await kiln.sql`update closure_summaries set closure_sizes[array_position(node_ids, ${g.derivations['top']!}::uuid)] = 1 where derivation_id = ${g.derivations['top']!}`;
    t.equal((await view()).sizes[g.derivations['top']!]![1], 1, 'the kept view is read, not recomputed');

    // side finishes: its size joins the closure, and the view is computed again.
    await insertCached(kiln.sql, cache.id, cachedRows(30_002, 1, () => [], () => 9_000));
    await kiln.sql`update derivation_builds set status = 'completed' where id = ${g.derivationBuilds['side']!}`;
    const second = await view();
    t.equal(second.total, 14_700);
    t.same(second.sizes[g.derivations['top']!], [null, 14_700], 'recomputed once a size in the closure changed');
    t.same(second.sizes[g.derivations['side']!], [9_000, 9_000]);

    // The cache lets leaf go: nar_size follows the cache, the recorded sizes stay.
    await kiln.sql`delete from path_signatures where cache_id = ${cache.id} and hash_part = ${hashPart(30_000)}`;
    const third = await view();
    t.equal(third.total, 14_700, 'the total is of recorded sizes');
    t.same(third.sizes[g.derivations['leaf']!], [null, 5_000], 'no cache holds leaf now; its recorded size still counts');

    // An evaluation's view is kept under the evaluation.
    const evaluation = await kiln.api<Graph>('GET', `/evals/${g.evaluation}/closure`, { token: ada.token });
    t.same([evaluation.message.node_count, evaluation.message.total_size_bytes], [4, 14_700]);
    const [evalKept] = await kiln.sql<{ n: number }[]>`select count(*)::int as n from closure_summaries where evaluation_id = ${g.evaluation}`;
    t.equal(evalKept!.n, 1);
  });
});
