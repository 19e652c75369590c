// One query on the NAR tables: lists a cache's paths, filtered, sorted and paged.
import type { ISql } from 'postgres';
import { toCachePathRow, type CachePathRow, type RawCachePathRow } from './cachePathRow.js';

export interface CachePathQuery {
  /** a prefix of the hash part: nix32 characters only (checked by the caller) */
  hashPrefix?: string;
  /** a substring of the name part of the store path, case-insensitive */
  package?: string;
  sort: 'created_at' | 'nar_size' | 'last_fetched_at';
  order: 'asc' | 'desc';
  limit: number;
  offset: number;
}

/** One page of a cache's paths and the number of paths matching the filters. */
export async function listCachePaths(sql: ISql, cacheId: string, q: CachePathQuery): Promise<{ rows: CachePathRow[]; total: number }> {
  const hashFilter = q.hashPrefix === undefined ? sql`` : sql`and s.hash_part like ${`${q.hashPrefix}%`}`;
  // position() rather than LIKE: a package filter with % or _ means those characters themselves.
  const packageFilter = q.package === undefined
    ? sql``
    : sql`and position(lower(${q.package}) in lower(substring(p.store_path from '/[0-9a-df-np-sv-z]{32}-([^/]*)$'))) > 0`;
  const column = q.sort === 'nar_size' ? sql`p.nar_size` : q.sort === 'last_fetched_at' ? sql`s.last_fetched_at` : sql`s.created_at`;
  // Never-fetched paths count as the oldest fetches: last in desc, first in asc.
  const direction = q.order === 'asc' ? sql`asc nulls first` : sql`desc nulls last`;
  const rows = await sql<(RawCachePathRow & { total: string })[]>`
    select s.hash_part, p.store_path, p.nar_hash, p.nar_size, p.file_hash, p.file_size, p.refs, p.deriver, p.ca,
           s.signature, s.created_at, s.last_fetched_at, count(*) over () as total
    from path_signatures s join cached_paths p on p.id = s.cached_path_id
    where s.cache_id = ${cacheId} ${hashFilter} ${packageFilter}
    order by ${column} ${direction}, s.hash_part ${q.order === 'asc' ? sql`asc` : sql`desc`}
    limit ${q.limit} offset ${q.offset}`;
  if (rows.length > 0) return { rows: rows.map(toCachePathRow), total: Number(rows[0]!.total) };
  if (q.offset === 0) return { rows: [], total: 0 };
  // A page past the end still reports how many paths match.
  const [count] = await sql<{ n: string }[]>`
    select count(*) as n from path_signatures s join cached_paths p on p.id = s.cached_path_id
    where s.cache_id = ${cacheId} ${hashFilter} ${packageFilter}`;
  return { rows: [], total: Number(count?.n ?? 0) };
}
