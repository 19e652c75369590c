// NAR file fetches per cache, file and UTC day (0045_metric_windows.sql, docs/metrics.md "the
// cache board"): added to by every server process at its traffic flush, read as the board's top
// fetched paths, pruned with the minute counters (metrics.retention.rawDays).
import type { Queryable as ISql } from './queryable.js';
import { deleteInSlices } from './sliceDeletes.js';

export interface PathFetchCount {
  cacheId: string;
  /** the UTC day's start */
  day: Date;
  fileHash: string;
  fetches: number;
  bytes: number;
}

/** Adds a flush's counts; rows of caches deleted meanwhile are skipped. */
export async function addPathFetches(sql: ISql, rows: readonly PathFetchCount[]): Promise<void> {
  if (rows.length === 0) return;
  await sql`
    insert into cache_path_fetches (cache_id, day, file_hash, fetches, bytes)
    select u.cache_id, u.day, u.file_hash, u.fetches, u.bytes
    from unnest(${sql.array(rows.map((r) => r.cacheId))}::uuid[], ${sql.array(rows.map((r) => r.day.toISOString().slice(0, 10)))}::date[],
                ${sql.array(rows.map((r) => r.fileHash))}::text[], ${sql.array(rows.map((r) => r.fetches))}::bigint[], ${sql.array(rows.map((r) => r.bytes))}::bigint[])
      as u (cache_id, day, file_hash, fetches, bytes)
    join caches c on c.id = u.cache_id
    on conflict (cache_id, day, file_hash) do update set
      fetches = cache_path_fetches.fetches + excluded.fetches, bytes = cache_path_fetches.bytes + excluded.bytes`;
}

/** Deletes the days before `before`'s day; how many rows. */
export async function prunePathFetches(sql: ISql, before: Date): Promise<number> {
  const day = before.toISOString().slice(0, 10);
  return deleteInSlices(async (limit) => (await sql`
    delete from cache_path_fetches where ctid in (select ctid from cache_path_fetches where day < ${day}::date limit ${limit})`).count);
}

/** Per cache, its `limit` most fetched NAR files since `since`'s UTC day, with the store path they hold (if still stored). */
export async function topFetchedPaths(sql: ISql, cacheIds: readonly string[], since: Date, limit: number): Promise<Map<string, { store_path: string | null; file_hash: string; fetches: number; bytes: number }[]>> {
  const top = new Map<string, { store_path: string | null; file_hash: string; fetches: number; bytes: number }[]>();
  if (cacheIds.length === 0 || limit === 0) return top;
  const rows = await sql<{ cache_id: string; file_hash: string; fetches: string; bytes: string; store_path: string | null }[]>`
    select t.cache_id, t.file_hash, t.fetches, t.bytes,
           (select p.store_path from cached_paths p join path_signatures s on s.cached_path_id = p.id
            where p.file_hash = t.file_hash and s.cache_id = t.cache_id limit 1) as store_path
    from (
      select cache_id, file_hash, sum(fetches) as fetches, sum(bytes) as bytes,
             row_number() over (partition by cache_id order by sum(fetches) desc, file_hash) as rank
      from cache_path_fetches
      where cache_id = any(${sql.array([...cacheIds])}::uuid[]) and day >= ${since.toISOString().slice(0, 10)}::date
      group by cache_id, file_hash
    ) t where t.rank <= ${limit} order by t.cache_id, t.rank`;
  for (const r of rows) {
    const list = top.get(r.cache_id) ?? [];
    list.push({ store_path: r.store_path, file_hash: r.file_hash, fetches: Number(r.fetches), bytes: Number(r.bytes) });
    top.set(r.cache_id, list);
  }
  return top;
}
