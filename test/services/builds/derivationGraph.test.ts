// The numbered derivation graph (migration 0081, services/builds/derivationNumbers.ts): every
// derivation the recorder writes gets a derivation_graph row whose inputs' numbers are its edges',
// recorded sizes reach it with the derivation's, a deleted derivation's row goes with it, and a
// closure view read by number answers what the view read by edges answers (and falls back to the
// edges when a node has no row). Direct builds number what they insert, repair a row a server
// older than 0081 left out, and never write a size over a completion's.
import t from 'tap';
import type { Sql } from 'postgres';
import { recordEvalBatch } from '../../../services/builds/graphRecorder.js';
import { buildTimeClosures } from '../../../services/builds/buildTimeClosures.js';
import { readNumbered } from '../../../services/builds/closureReads.js';
import { numberFromEdges, numberRecorded } from '../../../services/builds/derivationNumbers.js';
import { testDatabase } from '../../support/db.js';
import { derivationNode, type DerivationNodeFixture } from '../../support/derivationNodes.js';
import { startTestKiln, type TestKiln } from '../../support/kiln.js';
import { signUp } from '../../support/accounts.js';
import { createTestCache } from '../../support/caches.js';
import { exportStream, multipartBody, syntheticDrv, type SyntheticDrv } from '../../support/directClosure.js';
import { evalBatch, recordingFixture } from '../../support/recordingFixture.js';

/** Derivations whose graph row is missing, or says other inputs than their edges, or another recorded size. */
const disagreeing = (sql: Sql) => sql<{ drv_path: string }[]>`
  select d.drv_path from derivations d left join derivation_graph g on g.num = d.num
  where g.num is null or g.derivation_id <> d.id or g.output_nar_size is distinct from d.output_nar_size
     or (select array_agg(x order by x) from unnest(g.deps) x)
        is distinct from (select array_agg(i.num order by i.num) from derivation_edges e join derivations i on i.id = e.depends_on where e.derivation_id = d.id)`;

/** A random graph of `n` derivations, each using up to 3 of the later ones (inputs come first when reversed). */
function randomGraph(n: number, seed: number): DerivationNodeFixture[] {
  let state = seed;
  const random = () => ((state = (state * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  const nodes: DerivationNodeFixture[] = new Array(n);
  for (let i = n - 1; i >= 0; i--) {
    const inputs = new Set<string>();
    for (let k = 0; k < 3 && i + 1 < n; k++) if (random() < 0.8) inputs.add(nodes[i + 1 + Math.floor(random() * Math.min(20, n - i - 1))]!.drvPath);
    nodes[i] = derivationNode(`d${i}`, [...inputs]);
  }
  return nodes;
}

t.test('the recorder numbers every derivation it writes as its edges say; sizes and deletions reach the rows', async (t) => {
  const { db, events, evaluation } = await recordingFixture(t);
  const batch = (evaluationId: string, nodes: DerivationNodeFixture[]) => evalBatch(evaluationId, { derivations: nodes.map((n) => n.derivation) });

  const graph = randomGraph(120, 7).reverse();
  const first = await evaluation();
  // three batches, inputs before what uses them; the later ones use inputs of earlier batches
  for (let i = 0; i < graph.length; i += 40) await recordEvalBatch(events, first, batch(first, graph.slice(i, i + 40)));
  t.same(await disagreeing(db.sql), [], 'every derivation has a row with its edges\' inputs, numbered');
  // another evaluation reaching most of the same graph, and new derivations on top of it
  const second = await evaluation();
  const top = derivationNode('top', [graph[119]!.drvPath, graph[60]!.drvPath]);
  await recordEvalBatch(events, second, batch(second, [...graph.slice(50), top, graph[0]!]));
  t.same(await disagreeing(db.sql), [], 'a shared derivation keeps its row; a new one is numbered');
  const [counts] = await db.sql<{ derivations: number; rows: number }[]>`
    select (select count(*)::int from derivations) as derivations, (select count(*)::int from derivation_graph) as rows`;
  t.same(counts, { derivations: 121, rows: 121 }, 'one row each');

  // a build finishing records its output size on both rows
  const leaf = graph[0]!;
  const hash = leaf.out.slice('/nix/store/'.length, '/nix/store/'.length + 32);
  await db.sql`insert into cached_paths (hash_part, store_path, nar_hash, nar_size, file_hash, file_size, listing)
    values (${hash}, ${leaf.out}, 'sha256:x', 4242, ${'f'.repeat(52)}, 1, '{}')`;
  await db.sql`update derivation_builds set status = 'completed' where derivation_id = (select id from derivations where drv_path = ${leaf.drvPath})`;
  const sizes = await db.sql<{ d: string | null; g: string | null }[]>`
    select d.output_nar_size::text as d, g.output_nar_size::text as g from derivations d join derivation_graph g on g.num = d.num where d.drv_path = ${leaf.drvPath}`;
  t.same(sizes, [{ d: '4242', g: '4242' }], 'the recorded size on both rows');

  // a deleted derivation (collection) takes its row with it
  const [gone] = await db.sql<{ num: string }[]>`delete from derivations where drv_path = ${top.drvPath} returning num::text`;
  t.same(await db.sql`select 1 from derivation_graph where num = ${gone!.num}`, [], 'its row is gone');
});

t.test('a closure view by number answers as by edges; a node without a row sends it to the edges', async (t) => {
  const { sql } = await testDatabase(t);
  const n = 900;
  // derivation i uses up to 3 among the next 40, sizes by a hash (the view shows 500 of them)
  await sql`
    insert into derivations (drv_path, name, system, outputs, output_nar_size)
    select '/nix/store/' || lpad(i::text, 32, '0') || '-d' || i || '.drv', 'd' || i, 'x86_64-linux', '{}', 1 + (hashint4(i) & 4095)
    from generate_series(0, ${n - 1}) i`;
  await sql`
    insert into derivation_edges (derivation_id, depends_on)
    select distinct a.id, b.id from derivations a
    cross join lateral (values (1 + (hashint4(substr(a.name, 2)::int) & 1023) % 40), (1 + (hashint4(substr(a.name, 2)::int * 3) & 1023) % 40),
      (1 + (hashint4(substr(a.name, 2)::int * 7) & 1023) % 40)) j(k)
    join derivations b on b.name = 'd' || (substr(a.name, 2)::int + j.k)`;
  const ids = (await sql<{ id: string; name: string }[]>`select id, name from derivations`);
  const byName = new Map(ids.map((r) => [r.name, r.id]));
  const closures = buildTimeClosures(sql);
  const view = async (roots: string[]) => {
    await sql`delete from closure_summaries`;
    return closures.graph({ derivation: roots[0]! }, roots, []);
  };
  const roots = [byName.get('d0')!, byName.get('d3')!];

  t.equal(await readNumbered(sql, roots), undefined, 'no graph rows yet: read by edges');
  const byEdges = await view(roots);
  t.ok(byEdges.truncated && byEdges.nodes.length === 500, 'past the 500-node cut');
  t.ok(await readNumbered(sql, roots), 'the fallback numbered the closure: read by number');
  await numberFromEdges(sql, ids.map((r) => r.id));
  t.same(await disagreeing(sql), [], 'every node has its row');
  t.same(await view(roots), byEdges, 'the same view by number');
  const [state] = await sql<{ node_count: number }[]>`select node_count from closure_summaries`;
  t.equal(state!.node_count, byEdges.node_count);
  t.same(await closures.graph({ derivation: roots[0]! }, roots, []), byEdges, 'and kept: the next view checks it by number');

  // a node deep in the closure without its row (written by a server older than 0081)
  await sql`delete from derivation_graph where derivation_id = ${byName.get('d500')!}`;
  t.equal(await readNumbered(sql, roots), undefined, 'a node without a row: read by edges');
  t.same(await view(roots), byEdges, 'the same view');
  t.ok(await readNumbered(sql, roots), 'the fallback wrote the row: read by number again');
  t.same(await disagreeing(sql), [], 'as its edges say');
  t.same(await closures.graph({ derivation: roots[0]! }, roots, []), byEdges, 'kept, and checked by number');

  // an input collected while the rows above it keep its number
  await sql`delete from derivations where name = 'd500'`;
  t.equal(await readNumbered(sql, roots), undefined, 'a row naming a collected input: read by edges');
  const collected = await view(roots);
  t.ok(await readNumbered(sql, roots), 'the rows above it rewritten: read by number again');
  t.same(await disagreeing(sql), [], 'as their edges say');
  t.same(await view(roots), collected, 'the same view by number');

  // a kept view still current, checked by edges: the check writes the missing row
  await sql`delete from derivation_graph where derivation_id = ${byName.get('d600')!}`;
  t.same(await closures.graph({ derivation: roots[0]! }, roots, []), collected, 'kept, checked by edges');
  t.ok(await readNumbered(sql, roots), 'and the row written: read by number again');
  t.same(await disagreeing(sql), [], 'as its edges say');

  // a repair that cannot have its locks in time (lock_timeout) leaves the row to the next view, and
  // the views answer meanwhile (review r7a part 1, item 1)
  await sql`delete from derivation_graph where derivation_id = ${byName.get('d700')!}`;
  const holder = await sql.reserve();
  await holder`begin`;
  await holder`lock table derivation_graph in share mode`;
  const both = await Promise.all([view(roots), view(roots)]);
  t.same(both, [collected, collected], 'two views at once answer while the repair cannot write');
  t.equal(await readNumbered(sql, roots), undefined, 'the row not written while its table was locked');
  await holder`rollback`;
  holder.release();
  t.same(await view(roots), collected, 'the next view');
  t.ok(await readNumbered(sql, roots), 'wrote the row: read by number again');
});

t.test('direct builds number their derivations; a completion racing one keeps its size', async (t) => {
  const kiln = await startTestKiln(t);
  const { token } = await signUp(kiln, 'ada');
  t.equal((await kiln.api('PUT', '/orgs', { token, body: { name: 'acme' } })).status, 200);
  t.equal((await kiln.api('PUT', '/projects/acme', { token, body: { name: 'app', repository: 'file:///nonexistent' } })).status, 200);
  const [project] = await kiln.sql<{ id: string }[]>`select id from projects where name = 'app'`;
  const cache = await createTestCache(kiln.sql, 'main', { public: true });
  await kiln.sql`insert into subscriptions (project_id, cache_id, mode) values (${project!.id}, ${cache.id}, 0)`;
  const submit = async (closure: SyntheticDrv[]) => {
    const { body, contentType } = multipartBody([['project', 'acme/app'], ['closure', exportStream(closure)]]);
    const res = await fetch(`${kiln.url}/api/v1/builds`, { method: 'POST', body, headers: { 'content-type': contentType, authorization: `Bearer ${token}` } });
    t.equal(res.status, 200, res.status === 200 ? 'submitted' : await res.text());
  };
  const sized = (drv: SyntheticDrv, size: number) => kiln.sql`insert into cached_paths (hash_part, store_path, nar_hash, nar_size, file_hash, file_size, listing)
    values (${drv.outPath.slice(11, 43)}, ${drv.outPath}, 'sha256:x', ${size}, ${'f'.repeat(52)}, 1, '{}')`;
  const graphSize = async (drv: SyntheticDrv) => (await kiln.sql<{ d: string | null; g: string | null }[]>`
    select d.output_nar_size::text as d, g.output_nar_size::text as g from derivations d left join derivation_graph g on g.num = d.num where d.drv_path = ${drv.drvPath}`)[0];

  const dep = syntheticDrv('kiln-dep');
  const top = syntheticDrv('kiln-top', { inputDrvs: [dep] });
  await submit([dep, top]);
  t.same(await disagreeing(kiln.sql), [], 'every derivation of the closure has its row');

  // A completion of dep (its trigger writes the size on both rows) holds its locks while a direct
  // build over dep is recorded (it waits at its insert of dep): dep's row keeps the size.
  const idOf = async (drv: SyntheticDrv) => (await kiln.sql<{ id: string }[]>`select id from derivations where drv_path = ${drv.drvPath}`)[0]!.id;
  const complete = (drv: SyntheticDrv, status: string) => (c: Sql) =>
    c`update derivation_builds set status = ${status} where derivation_id = (select id from derivations where drv_path = ${drv.drvPath})`;
  await sized(dep, 555);
  const over = syntheticDrv('kiln-over', { inputDrvs: [dep] });
  await racing(kiln, complete(dep, 'completed'), () => submit([dep, over]));
  t.same(await graphSize(dep), { d: '555', g: '555' }, 'the completion\'s size stays on the graph row');
  t.same(await disagreeing(kiln.sql), [], 'and the new derivation is numbered');

  // The same race with the completion first reaching the numbering statement itself (as when it
  // starts after the direct build's inserts): an unchanged row is not written, so not waited for.
  await sized(over, 556);
  await racing(kiln, complete(over, 'completed'), async () => kiln.sql.begin(async (tx) => numberRecorded(tx, [await idOf(over)], new Set(), new Set())));
  t.same(await graphSize(over), { d: '556', g: '556' }, 'an unchanged row keeps the size a completion writes meanwhile');

  // A row left out (as by a server older than 0081) is written with the size a substitution
  // committing meanwhile recorded: the build is share-locked before the size is read.
  const remove = (drv: SyntheticDrv) => kiln.sql`delete from derivation_graph where derivation_id = (select id from derivations where drv_path = ${drv.drvPath})`;
  await remove(top);
  await sized(top, 777);
  await racing(kiln, complete(top, 'substituted'), async () => kiln.sql.begin(async (tx) => numberRecorded(tx, [await idOf(top)], new Set(), new Set())));
  t.same(await graphSize(top), { d: '777', g: '777' }, 'the repaired row has the size');
  // and a direct build over a closure with a row left out writes it again
  await remove(top);
  await submit([dep, top]);
  t.same(await disagreeing(kiln.sql), [], 'every row agrees');

  // A deadlock with another transaction rolls the direct build back, and it runs again: the other
  // changes dep (the direct build waits at its insert of dep) and then wants the task row the
  // direct build's evaluation holds (the direct build, waiting longer, is the one rolled back).
  const again = syntheticDrv('kiln-again', { inputDrvs: [dep] });
  const c = await kiln.sql.reserve();
  try {
    await c`begin`;
    await c`set local deadlock_timeout = '20s'`;
    await c`update derivations set name = name where drv_path = ${dep.drvPath}`;
    const posting = submit([dep, again]);
    await untilWaiting(kiln, () => false);
    await c`select 1 from tasks where project_id = ${project!.id} and name = 'direct' for update`;
    await c`commit`;
    await posting;
  } finally {
    c.release();
  }
  const [evaluations] = await kiln.sql<{ n: number }[]>`select count(*)::int as n from evaluations where kind = 'direct' and wildcard = ${again.drvPath}`;
  t.equal(evaluations!.n, 1, 'recorded once, by the second run');
});

/** `change` in an open transaction; `then` starts, and once it waits for a lock or is done the change commits. */
async function racing(kiln: TestKiln, change: (c: Sql) => PromiseLike<unknown>, then: () => Promise<unknown>): Promise<void> {
  const c = await kiln.sql.reserve();
  try {
    await c`begin`;
    await change(c);
    let done = false;
    const running = then().finally(() => { done = true; });
    await untilWaiting(kiln, () => done);
    await c`commit`;
    await running;
  } finally {
    c.release();
  }
}

/** Until a backend of the test's database waits for a lock, or `done` (at most ~5 s). */
async function untilWaiting(kiln: TestKiln, done: () => boolean): Promise<void> {
  for (let i = 0; i < 100 && !done(); i++) {
    const [waiting] = await kiln.sql<{ n: number }[]>`
      select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`;
    if (waiting!.n > 0) return;
    await new Promise((r) => setTimeout(r, 50));
  }
}
