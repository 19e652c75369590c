// The live set as a collection pass computes it (docs/gc.md, "The live set"): the hash parts of the
// build-time closure of every retained evaluation (outputs, .drv files and input sources of every
// derivation its builds rows name, which is its whole graph) and the runtime closure of those
// paths as cached (the references of their cached_paths rows, transitively); and per cache, the
// closures of its unexpired pins. Kept in gc_live_paths and gc_pinned_paths (migration 0020), which
// only the holder of the collector's lock fills; deletions check them again in their own statement.
import type { Fragment, ISql, Sql } from 'postgres';

/** Hash part of a store path column or expression: the first 32 characters of its base name. */
const hashPartOf = (sql: ISql, path: Fragment) => sql`left(substring(${path} from '[^/]+$'), 32)`;

/**
 * Adds the store paths of the derivations that these builds rows name, with their runtime closure,
 * to the live set. `builds` filters the builds table (alias b).
 */
async function addBuildClosures(sql: ISql, builds: Fragment): Promise<number> {
  const rows = await sql`
    with recursive roots(h) as (
      select ${hashPartOf(sql, sql`x.p`)} from builds b
      join derivation_builds db on db.id = b.derivation_build_id
      join derivations d on d.id = db.derivation_id
      cross join lateral (
        select o.value from jsonb_each_text(d.outputs) o
        union all select d.drv_path
        union all select unnest(d.input_srcs)) as x(p)
      where ${builds} and x.p is not null),
    -- A path already in the set has its closure there too (the set is closed under references
    -- after every addition), so the walk starts and continues only from paths new to it.
    closure(h) as (
      select h from roots where not exists (select 1 from gc_live_paths l where l.hash_part = roots.h)
      union
      select left(r, 32) from closure c join cached_paths p on p.hash_part = c.h cross join unnest(p.refs) as r
      where not exists (select 1 from gc_live_paths l where l.hash_part = left(r, 32)))
    insert into gc_live_paths (hash_part) select h from closure on conflict do nothing`;
  return rows.count;
}

/** The pins of `cacheId` (every cache when null) and their closures as that cache holds them. */
export async function addPinnedClosures(sql: ISql, now: Date, cacheId: string | null, hashPart?: string): Promise<number> {
  const which = cacheId === null ? sql`true` : hashPart === undefined ? sql`cache_id = ${cacheId}` : sql`cache_id = ${cacheId} and hash_part = ${hashPart}`;
  const rows = await sql`
    with recursive pinned(cache_id, h) as (
      select cache_id, hash_part from cache_pins where ${which} and (expires_at is null or expires_at > ${now})
      union
      select pc.cache_id, left(r, 32) from pinned pc
      join path_signatures s on s.cache_id = pc.cache_id and s.hash_part = pc.h
      join cached_paths p on p.id = s.cached_path_id
      cross join unnest(p.refs) as r)
    insert into gc_pinned_paths (cache_id, hash_part) select cache_id, h from pinned on conflict do nothing`;
  return rows.count;
}

export interface LiveSetSize {
  livePaths: number;
  pinnedPaths: number;
}

/**
 * Computes the live set afresh. The state row goes first, so an upload looking for room
 * (storage/gc/roomForUpload.ts) never evicts by a half-filled set; it returns when the sets are whole.
 */
export async function computeLiveSet(sql: Sql, retained: Fragment, startedAt: Date, now: Date): Promise<LiveSetSize> {
  await sql`delete from gc_live_state`;
  await sql`truncate gc_live_paths, gc_pinned_paths`;
  const livePaths = await addBuildClosures(sql, sql`b.evaluation_id in (${retained})`);
  const pinnedPaths = await addPinnedClosures(sql, now, null);
  await sql`insert into gc_live_state (computed_from) values (${startedAt})`;
  return { livePaths, pinnedPaths };
}

/**
 * Adds what evaluations recorded since `since` (builds rows of open evaluations and of evaluations
 * created since) to the live set: a graph batch committed during the pass keeps its paths. An hour
 * of margin covers transactions that began (and stamped created_at) before `since` but committed after.
 */
export async function topUpLiveSet(sql: ISql, since: Date): Promise<number> {
  const from = new Date(since.getTime() - 3600_000);
  return addBuildClosures(sql, sql`b.evaluation_id in (
      select id from evaluations where created_at >= ${from} or phase not in ('completed', 'failed', 'aborted'))
    and b.created_at >= ${from}`);
}
