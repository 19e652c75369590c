// ClosureGraph cost (services/builds/closures.ts) on synthetic build graphs shaped like a package set:
// node i uses 3 inputs among the next 50 derivations plus one of the last 20 (a toolchain every
// package shares); every derivation is built, with its output size recorded. The baseline, in the
// same run, is the bare recursive CTE that lists the closure's nodes: what any closure view costs
// before ranking nodes by accumulated closure size. kiln is timed cold (no kept view: the first
// request, or the first after a size in the closure changed) and warm (the kept view still holds).
// Rounds rotate which goes first; each ratio is the median of the rounds' ratios.
//
//   npx tsx bench/closures.bench.ts [sizes=1000,3000,10000] [rounds=3]
import { readFile } from 'node:fs/promises';
import postgres from 'postgres';
import { KILN_SESSION, migrate } from '../storage/index.js';
import { closuresService } from '../services/builds/closures.js';
import { numberFromEdges } from '../services/builds/derivationNumbers.js';
import type { BuildView, EvaluationsService } from '../services/index.js';
import { anonymous } from '../services/index.js';

const sizes = (process.argv[2] ?? '1000,3000,10000').split(',').map(Number);
const rounds = Number(process.argv[3] ?? 3);
const admin = postgres('postgres://postgres@127.0.0.1:5432/postgres', { max: 1, onnotice: () => undefined });
const dbName = `kiln_bench_closures_${process.pid}`;
await admin.unsafe(`create database ${dbName}`);
// kiln's own session settings (no JIT) for both the baseline and kiln: the same connection times both
const sql = postgres(`postgres://postgres@127.0.0.1:5432/${dbName}`, { max: 2, onnotice: () => undefined, connection: { ...KILN_SESSION } });
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1] ?? NaN;
const ms = async (run: () => Promise<unknown>) => {
  const t0 = performance.now();
  await run();
  return performance.now() - t0;
};

try {
  await migrate(sql);
  const [org] = await sql<{ id: string }[]>`insert into organizations (name, ssh_public_key, ssh_private_key) values ('bench', 'k', '\\x00') returning id`;
  const [project] = await sql<{ id: string }[]>`insert into projects (organization_id, name, repository) values (${org!.id}, 'p', 'file:///x') returning id`;
  const [cache] = await sql<{ id: string }[]>`insert into caches (name, key_name, public_key, secret_key) values ('c', 'c-1', ${Buffer.alloc(32)}, ${Buffer.alloc(64)}) returning id`;
  await sql`insert into subscriptions (project_id, cache_id, mode) values (${project!.id}, ${cache!.id}, 0)`;
  const [task] = await sql<{ id: string }[]>`insert into tasks (project_id, name) values (${project!.id}, 'default') returning id`;

  for (const n of sizes) {
    await sql`truncate derivations, derivation_graph, derivation_builds, builds, evaluations, cached_paths, path_signatures cascade`;
    const [evaluation] = await sql<{ id: string }[]>`insert into evaluations (task_id, repository, wildcard) values (${task!.id}, 'file:///x', '*') returning id`;
    await sql`
      insert into derivations (drv_path, name, system, outputs)
      select '/nix/store/' || lpad(i::text, 32, '0') || '-d' || i || '.drv', 'd' || i, 'x86_64-linux',
        jsonb_build_object('out', '/nix/store/' || lpad((i + 10000000)::text, 32, '0') || '-d' || i)
      from generate_series(0, ${n - 1}) i`;
    // not temporary: the pool's two connections both serve the bench's statements (a cold view uses both)
    await sql`
      create unlogged table bench_ids as select id, substring(name from 2)::int as i from derivations`;
    await sql`create index on bench_ids (i)`;
    await sql`
      insert into derivation_edges (derivation_id, depends_on)
      select distinct a.id, b.id from bench_ids a
      cross join lateral (values (a.i + 1 + (hashint4(a.i) & 1023) % 50), (a.i + 1 + (hashint4(a.i * 3) & 1023) % 50),
        (a.i + 1 + (hashint4(a.i * 7) & 1023) % 50), (${n} - 1 - (hashint4(a.i * 11) & 1023) % 20)) j(i)
      join bench_ids b on b.i = j.i where j.i > a.i`;
    await sql`drop table bench_ids`;
    // numbered as a recording leaves them (derivationNumbers.ts)
    await numberFromEdges(sql, (await sql<{ id: string }[]>`select id from derivations`).map((r) => r.id));
    await sql`
      with rows as (
        insert into cached_paths (hash_part, store_path, nar_hash, nar_size, file_hash, file_size, listing)
        select lpad((i + 10000000)::text, 32, '0'), '/nix/store/' || lpad((i + 10000000)::text, 32, '0') || '-d' || i, 'sha256:x',
          1000 + (hashint4(i) & 65535), lpad(i::text, 52, '0'), 1, '{}'
        from generate_series(0, ${n - 1}) i returning id, hash_part)
      insert into path_signatures (cache_id, hash_part, cached_path_id, signature) select ${cache!.id}, hash_part, id, 'c-1:x' from rows`;
    const [root] = await sql<{ id: string }[]>`select id from derivations where name = 'd0'`;
    // Every derivation built: finishing records its output size (migration 0052), as the scheduler's status change does.
    await sql`insert into derivation_builds (derivation_id) select id from derivations`;
    await sql`update derivation_builds set status = 'completed'`;
    const [db] = await sql<{ id: string }[]>`select id from derivation_builds where derivation_id = ${root!.id}`;
    const [build] = await sql<{ id: string }[]>`insert into builds (evaluation_id, derivation_build_id, entry_point) values (${evaluation!.id}, ${db!.id}, true) returning id`;
    // as the server leaves the graph after a large recording (services/builds/plannerStatistics.ts):
    // derivation_edges vacuumed (a recording only inserts into it) and every table analyzed; the
    // derivations' pages changed since as their builds finished, as here
    await sql`vacuum derivation_edges`;
    await sql`analyze`;
    const [edges] = await sql<{ n: number }[]>`select count(*)::int as n from derivation_edges`;

    const label = { project_id: project!.id } as Awaited<ReturnType<EvaluationsService['visible']>>;
    const service = closuresService(sql, { visible: async () => label }, { build: async () => ({ evaluation_id: evaluation!.id }) as BuildView });
    const baseline: number[] = [];
    const cold: number[] = [];
    const warm: number[] = [];
    let nodes = 0;
    const runBaseline = async () => baseline.push(await ms(() => sql`
      with recursive closure(id) as (select ${root!.id}::uuid union select e.depends_on from derivation_edges e join closure c on e.derivation_id = c.id)
      select count(*) from closure c join derivations d on d.id = c.id`));
    const view = async () => (nodes = (await service.build(anonymous, build!.id, false)).node_count);
    // cold: no kept view (the first view, or the first after a size in the closure changed)
    const runCold = async () => {
      await sql`delete from closure_summaries`;
      cold.push(await ms(view));
    };
    // warm: the view kept by the previous request still holds
    const runWarm = async () => {
      await view();
      warm.push(await ms(view));
    };
    const order = [runBaseline, runCold, runWarm];
    for (let r = 0; r < rounds; r++) {
      // Which goes first rotates.
      for (let k = 0; k < order.length; k++) await order[(r + k) % order.length]!();
    }
    const ratio = (xs: number[]) => Number(median(xs.map((x, i) => x / baseline[i]!)).toFixed(2));
    console.log(JSON.stringify({
      bench: 'closures', derivations: n, edges: edges!.n, closureNodes: nodes, baselineMs: Math.round(median(baseline)),
      coldMs: Math.round(median(cold)), warmMs: Math.round(median(warm)),
      // kiln's time ÷ the baseline's of each round, their median
      coldRatio: ratio(cold), warmRatio: ratio(warm),
      roundRatios: { cold: cold.map((k, i) => +(k / baseline[i]!).toFixed(2)), warm: warm.map((k, i) => +(k / baseline[i]!).toFixed(2)) },
      load: (await readFile('/proc/loadavg', 'utf8')).split(' ').slice(0, 3).join(' '),
    }));
  }
} finally {
  await sql.end();
  // BENCH_KEEP_DB=1 leaves the database for EXPLAIN (drop it by hand)
  if (process.env['BENCH_KEEP_DB']) console.log(`kept database ${dbName}`);
  else await admin.unsafe(`drop database ${dbName} with (force)`);
  await admin.end();
}
