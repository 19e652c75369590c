// The live set as a collection pass computes it (docs/gc.md, "The live set"), per cache: for every
// retained evaluation and every cache its project may write to (a read-write or write-only
// subscription of the project or of its organization), the hash parts of its build-time closure
// (outputs, .drv files and input sources of every derivation its builds rows name, which is its
// whole graph) that the cache holds, and their runtime closure as that cache holds it (the
// references of its copies, transitively); and per cache, the closures of its unexpired pins. So
// one tenant's evaluations keep nothing alive in a cache they may not write to. Kept in
// gc_live_paths (migration 0022) and gc_pinned_paths (0020), which only the holder of the
// collector's lock fills (and uploads looking for room top up); deletions check them again.
import type { Fragment, ISql, Sql } from 'postgres';

/**
 * Runs `fn` with PostgreSQL's JIT off: the planner's estimate for the recursive closure is millions of
 * rows whatever the graph, so it compiled the statement with inlining and optimization, 2.5 s of a
 * 7.4 s live set at 100,000 paths (bench/README.md, "gc"). In the caller's transaction when there is
 * one (the setting then holds to its end), else in one of its own.
 */
async function withoutJit<T>(sql: ISql, fn: (sql: ISql) => Promise<T>): Promise<T> {
  if ('begin' in sql && typeof sql.begin === 'function') {
    return (sql as Sql).begin(async (tx) => {
      await tx`set local jit = off`;
      return fn(tx);
    }) as Promise<T>;
  }
  await sql`set local jit = off`;
  return fn(sql);
}

/**
 * The references of a cache's copy (alias x, column refs), for a lateral join from each path the
 * closure walk reached. `limit 1` (the key allows one row anyway) keeps PostgreSQL from flattening
 * it into a join it would then plan for its estimate of millions of rows: hashing all of
 * path_signatures and cached_paths in every round of the walk. So each reached path costs two
 * primary-key probes, however large the tables.
 */
const copyRefs = (sql: ISql, cacheId: Fragment, hashPart: Fragment) => sql`(
  select p.refs from path_signatures s join cached_paths p on p.id = s.cached_path_id
  where s.cache_id = ${cacheId} and s.hash_part = ${hashPart} limit 1) as x`;

/** Hash part of a store path column or expression: the first 32 characters of its base name. */
const hashPartOf = (sql: ISql, path: Fragment) => sql`left(substring(${path} from '[^/]+$'), 32)`;

/**
 * Adds, per cache, the store paths of the derivations that builds rows of these evaluations name
 * (`builds` filters them further, alias b), with their runtime closure, to the live set.
 */
async function addBuildClosures(outer: ISql, evaluations: Fragment, builds: Fragment): Promise<number> {
  const rows = await withoutJit(outer, (sql) => sql`
    with recursive evaluation_caches(evaluation_id, cache_id) as materialized (
      select distinct e.id, s.cache_id from evaluations e
      join tasks t on t.id = e.task_id join projects p on p.id = t.project_id
      join subscriptions s on (s.project_id = p.id or s.organization_id = p.organization_id) and s.mode in (0, 2)
      where e.id in (${evaluations})),
    -- Successive evaluations share most of their graphs: each derivation build once per cache.
    cache_builds(cache_id, derivation_build_id) as materialized (
      select distinct ec.cache_id, b.derivation_build_id from builds b join evaluation_caches ec on ec.evaluation_id = b.evaluation_id
      where ${builds}),
    roots(cache_id, h) as (
      select cb.cache_id, ${hashPartOf(sql, sql`x.p`)} from cache_builds cb
      join derivation_builds db on db.id = cb.derivation_build_id
      join derivations d on d.id = db.derivation_id
      cross join lateral (
        select o.value from jsonb_each_text(d.outputs) o
        union all select d.drv_path
        union all select unnest(d.input_srcs)) as x(p)
      where x.p is not null),
    -- A path already in the set has its closure there too (the set is closed under references
    -- after every addition), so the walk starts and continues only from paths new to it.
    closure(cache_id, h) as (
      select cache_id, h from roots
      where not exists (select 1 from gc_live_paths l where l.cache_id = roots.cache_id and l.hash_part = roots.h)
      union
      select c.cache_id, left(r, 32) from closure c
      cross join lateral ${copyRefs(sql, sql`c.cache_id`, sql`c.h`)}
      cross join unnest(x.refs) as r
      where not exists (select 1 from gc_live_paths l where l.cache_id = c.cache_id and l.hash_part = left(r, 32)))
    insert into gc_live_paths (cache_id, hash_part) select cache_id, h from closure on conflict do nothing`);
  return rows.count;
}

/** The pins of `cacheId` (every cache when null) and their closures as that cache holds them. */
export async function addPinnedClosures(outer: ISql, now: Date, cacheId: string | null, hashPart?: string): Promise<number> {
  const rows = await withoutJit(outer, (sql) => sql`
    with recursive pinned(cache_id, h) as (
      select cache_id, hash_part from cache_pins
      where ${cacheId === null ? sql`true` : hashPart === undefined ? sql`cache_id = ${cacheId}` : sql`cache_id = ${cacheId} and hash_part = ${hashPart}`}
        and (expires_at is null or expires_at > ${now})
      union
      select pc.cache_id, left(r, 32) from pinned pc
      cross join lateral ${copyRefs(sql, sql`pc.cache_id`, sql`pc.h`)}
      cross join unnest(x.refs) as r)
    insert into gc_pinned_paths (cache_id, hash_part) select cache_id, h from pinned on conflict do nothing`);
  return rows.count;
}

export interface LiveSetSize {
  livePaths: number;
  pinnedPaths: number;
}

/** A graph batch's transaction may have begun (and stamped created_at) this long before it committed. */
const BATCH_MARGIN_MS = 3600_000;
const FINAL = (sql: ISql) => sql`('completed', 'failed', 'aborted')`;

/**
 * Evaluations created since `from` that are final now. Every builds row of such an evaluation
 * committed before its final phase did, so any statement starting after this query sees them all:
 * once a statement has added their closures, later top-ups skip them ("covered").
 */
async function finalSince(sql: ISql, from: Date, covered: readonly string[]): Promise<string[]> {
  const rows = await sql<{ id: string }[]>`
    select id from evaluations where created_at >= ${from} and phase in ${FINAL(sql)} and not (id = any(${covered as string[]}::uuid[]))`;
  return rows.map((r) => r.id);
}

/**
 * Computes the live set afresh. The state row goes first, so an upload looking for room
 * (storage/gc/roomForUpload.ts) never evicts by a half-filled set; it returns when the sets are whole.
 */
export async function computeLiveSet(sql: Sql, retained: Fragment, startedAt: Date, now: Date): Promise<LiveSetSize> {
  await sql`delete from gc_live_state`;
  await sql`truncate gc_live_paths, gc_pinned_paths`;
  // Final before the set is computed: a retained one is in it whole, one that is not retained adds nothing.
  const covered = await finalSince(sql, new Date(startedAt.getTime() - BATCH_MARGIN_MS), []);
  const livePaths = await addBuildClosures(sql, retained, sql`true`);
  const pinnedPaths = await addPinnedClosures(sql, now, null);
  await sql`insert into gc_live_state (computed_from, covered) values (${startedAt}, ${covered}::uuid[])`;
  return { livePaths, pinnedPaths };
}

/**
 * Adds what evaluations recorded since the set was computed (builds rows of open evaluations and of
 * evaluations created since, with an hour of margin for graph batches whose transactions began
 * earlier) to the live set: a graph batch committed during the pass keeps its paths. Evaluations
 * that were final when an earlier top-up (or the computation) began are skipped: it added them
 * whole. `record` (the pass, which holds the collector's lock) stores what this top-up covers;
 * an upload's top-up (under the state row's share lock) only reads it. Nothing when no set is stored.
 */
export async function topUpLiveSet(sql: ISql, record: boolean): Promise<number> {
  const [state] = await sql<{ computed_from: Date; covered: string[] }[]>`select computed_from, covered from gc_live_state`;
  if (!state) return 0;
  const from = new Date(state.computed_from.getTime() - BATCH_MARGIN_MS);
  const finals = record ? await finalSince(sql, from, state.covered) : [];
  // The ids first: with none (the usual case between evaluations) there is no statement over builds,
  // and with a few the statement finds their rows by evaluation instead of scanning builds by time
  // (3.6 s a page at 100,000 paths, whatever the page held: bench/README.md, "gc").
  const evaluations = (await sql<{ id: string }[]>`
    select id from evaluations where (created_at >= ${from} or phase not in ${FINAL(sql)}) and not (id = any(${state.covered}::uuid[]))`).map((r) => r.id);
  const added = evaluations.length === 0 ? 0 : await addBuildClosures(sql, sql`select unnest(${evaluations}::uuid[])`, sql`b.created_at >= ${from}`);
  if (finals.length > 0) await sql`update gc_live_state set covered = covered || ${finals}::uuid[]`;
  return added;
}
