// A collection pass over a large cache (issue 20, docs/gc.md): N synthetic cached paths in one
// public cache (each referring to two earlier ones), 1 % of them past the TTL and outside the live
// set, the live set from E evaluations of D derivations each (evaluation i uses derivations
// i·step … i·step + D, so they overlap like successive commits). Measured: the pass's duration, the
// process's peak RSS during it, and narinfo hits served from the database (distinct paths, so the
// hot cache does not answer) during the pass against the same requests idle, in the same run.
// Rows are marked debug-indexed (their listings are empty), so the debug index backfill stays idle.
// Before the pass, with the live set stored, the TTL candidates are read both ways in the same run:
// keyset pages of 1,000 in (cache, hash) order (what a pass did before) and one scan (what it does).
// Goal: ≤ 60 s for 1,000,000 paths, hit p99 during the pass ≤ 2× the idle p99, ≤ 512 MiB RSS.
//
//   npx tsx bench/gc.bench.ts [paths=1000000] [evaluations=30] [derivations=50000] [requests=3000]
import { computeLiveSet, pathsPastTtl, retainedEvaluationIds, type TtlRules } from '../storage/index.js';
import { startBenchKiln } from './benchKiln.js';

const paths = Number(process.argv[2] ?? 1_000_000);
const evaluations = Number(process.argv[3] ?? 30);
const derivations = Number(process.argv[4] ?? 50_000);
const requests = Number(process.argv[5] ?? 3000);
const step = 1000;
const distinctDerivations = derivations + (evaluations - 1) * step;
if (distinctDerivations > paths) throw new Error('more derivations than paths: their outputs are among the paths');

const bench = await startBenchKiln({ 'gc.narTtlHours': 24, 'gc.narUploadGraceHours': 1, 'gc.intervalSecs': 86_400, 'eval.maxKeep': evaluations });
const { sql, kiln } = bench;
const hash = (i: number) => String(i).padStart(32, '0');
const percentile = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))] ?? NaN;

try {
  await bench.createCache('big');
  const [cache] = await sql<{ id: string }[]>`select id from caches where name = 'big'`;
  const t0 = performance.now();
  // Paths: i < distinctDerivations are outputs of derivation i; every 100th of the others is old.
  await sql`
    insert into cached_paths (hash_part, store_path, nar_hash, nar_size, refs, file_hash, file_size, listing, debug_indexed)
    select lpad(i::text, 32, '0'), '/nix/store/' || lpad(i::text, 32, '0') || '-p' || i, 'sha256:x', 1000,
           case when i < 2 then '{}'::text[] else array[lpad((hashint4(i) & 2147483647 % i)::text, 32, '0') || '-r', lpad((i - 1)::text, 32, '0') || '-r'] end,
           lpad(i::text, 52, '0'), 500, '{}', true
    from generate_series(0, ${paths - 1}) i`;
  await sql`
    insert into path_signatures (cache_id, hash_part, cached_path_id, signature, created_at)
    select ${cache!.id}, hash_part, id, 'bench-big-1:x',
           case when id::bigint % 100 = 7 and id > ${distinctDerivations} then now() - interval '30 days' else now() end
    from cached_paths`;
  await sql`
    insert into derivations (drv_path, name, system, outputs)
    select '/nix/store/' || lpad((i + 900000000)::text, 32, '0') || '-d' || i || '.drv', 'd' || i, 'x86_64-linux',
           jsonb_build_object('out', '/nix/store/' || lpad(i::text, 32, '0') || '-p' || i)
    from generate_series(0, ${distinctDerivations - 1}) i`;
  await sql`insert into derivation_builds (derivation_id, status) select id, 'completed' from derivations`;
  await sql`insert into organizations (name, ssh_public_key, ssh_private_key) values ('bench', 'k', '\\x00')`;
  await sql`insert into projects (organization_id, name, repository) select id, 'p', 'file:///x' from organizations`;
  await sql`insert into tasks (project_id, name) select id, 'default' from projects`;
  // The project writes to the cache: its evaluations keep their closures alive there.
  await sql`insert into subscriptions (project_id, cache_id, mode) select id, ${cache!.id}, 0 from projects`;
  for (let e = 0; e < evaluations; e++) {
    const [ev] = await sql<{ id: string }[]>`
      insert into evaluations (task_id, repository, wildcard, phase, created_at)
      select id, 'file:///x', '*', 'completed', now() - make_interval(mins => ${evaluations - e}) from tasks returning id`;
    await sql`
      insert into builds (evaluation_id, derivation_build_id)
      select ${ev!.id}, db.id from derivation_builds db join derivations d on d.id = db.derivation_id
      where substring(d.name from 2)::int between ${e * step} and ${e * step + derivations - 1}`;
  }
  await sql`analyze`;
  const seeded = performance.now() - t0;
  const [expected] = await sql<{ n: number }[]>`select count(*)::int as n from path_signatures where created_at < now() - interval '1 day'`;
  console.log(`seeded ${paths} paths, ${distinctDerivations} derivations, ${evaluations} × ${derivations} builds rows in ${(seeded / 1000).toFixed(1)} s; ${expected!.n} old paths`);

  // Narinfo hits on distinct live paths, 8 at a time, each answered from the database.
  let next = 0;
  const hits = async (count: number, until?: () => boolean): Promise<number[]> => {
    const times: number[] = [];
    const one = async () => {
      while (until ? !until() : times.length < count) {
        const i = (next++ * 7919) % distinctDerivations;
        const t = performance.now();
        const res = await fetch(`${kiln.url}/cache/big/${hash(i)}.narinfo`);
        await res.arrayBuffer();
        if (res.status !== 200) throw new Error(`narinfo ${hash(i)}: ${res.status}`);
        times.push(performance.now() - t);
      }
    };
    await Promise.all(Array.from({ length: 8 }, one));
    return times;
  };
  const idle = await hits(requests);

  // The TTL candidates, read without removing anything, both ways, against the stored live set.
  const now = new Date();
  await computeLiveSet(sql, retainedEvaluationIds(sql, { maxKeep: evaluations, wedgedEvalHours: 0, now }), now, now);
  const rules: TtlRules = { now, ttlHours: 24, graceHours: 1 };
  const ttlFilter = sql`
    not c.keep_forever and coalesce(s.last_fetched_at, s.created_at) < ${now}::timestamptz - make_interval(hours => 1 + coalesce(c.nar_ttl_hours, 24))
    and not exists (select 1 from gc_live_paths l where l.cache_id = s.cache_id and l.hash_part = s.hash_part)
    and not exists (select 1 from gc_pinned_paths g where g.cache_id = s.cache_id and g.hash_part = s.hash_part)`;
  let tRead = performance.now();
  let keysetRows = 0;
  for (let after: { cache_id: string; hash_part: string } | undefined; ;) {
    const page = await sql<{ cache_id: string; hash_part: string }[]>`
      select s.cache_id, s.hash_part from path_signatures s join caches c on c.id = s.cache_id
      where ${after === undefined ? sql`true` : sql`(s.cache_id, s.hash_part) > (${after.cache_id}::uuid, ${after.hash_part})`} and ${ttlFilter}
      order by s.cache_id, s.hash_part limit 1000`;
    keysetRows += page.length;
    if (page.length < 1000) break;
    after = page[page.length - 1];
  }
  const keysetMs = performance.now() - tRead;
  tRead = performance.now();
  let scanRows = 0;
  for await (const page of pathsPastTtl(sql, rules, 1000)) scanRows += page.length;
  const scanMs = performance.now() - tRead;
  console.log(`TTL candidates read in the same run: keyset pages ${(keysetMs / 1000).toFixed(1)} s (${keysetRows} rows), one scan ${(scanMs / 1000).toFixed(1)} s (${scanRows} rows): ${(scanMs / keysetMs).toFixed(2)}×`);

  let rss = process.memoryUsage().rss;
  const sampler = setInterval(() => { rss = Math.max(rss, process.memoryUsage().rss); }, 100);
  await sql`insert into gc_runs (kind, requested_at) values ('pass', now())`;
  let done = false;
  const tPass = performance.now();
  const pass = kiln.gc.tick().finally(() => { done = true; });
  const during = await hits(0, () => done);
  const ran = await pass;
  const passMs = performance.now() - tPass;
  clearInterval(sampler);
  const [run] = await sql<{ result: { paths: number; live_paths: number; duration_ms: number; phases_ms: Record<string, number> } }[]>`select result from gc_runs where kind = 'pass' order by id desc limit 1`;
  const [left] = await sql<{ n: number }[]>`select count(*)::int as n from path_signatures`;

  const idleP99 = percentile(idle, 0.99);
  const duringP99 = percentile(during, 0.99);
  console.log(`pass: ran ${JSON.stringify(ran)} in ${(passMs / 1000).toFixed(1)} s (goal ≤ 60 s); removed ${run?.result.paths} paths (expected ${expected!.n}); live set ${run?.result.live_paths} rows; ${left!.n} paths left; phases (ms) ${JSON.stringify(run?.result.phases_ms)}`);
  console.log(`narinfo hit p50/p99: idle ${percentile(idle, 0.5).toFixed(1)}/${idleP99.toFixed(1)} ms (${idle.length} requests), during the pass ${percentile(during, 0.5).toFixed(1)}/${duringP99.toFixed(1)} ms (${during.length} requests): ${(duringP99 / idleP99).toFixed(2)}× (goal ≤ 2×)`);
  console.log(`peak RSS during the pass: ${(rss / 2 ** 20).toFixed(0)} MiB (goal ≤ 512 MiB; the bench's own client shares the process)`);
} finally {
  await bench.stop();
}
