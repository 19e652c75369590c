// One query on the NAR tables: finds a path a cache holds.
import type { ISql } from 'postgres';
import { toCachePathRow, type CachePathRow, type RawCachePathRow } from './cachePathRow.js';

/** The path of `hashPart` as the cache holds it, with the number of caches holding the same path. */
export async function findCachePath(sql: ISql, cacheId: string, hashPart: string): Promise<(CachePathRow & { cacheCount: number }) | null> {
  const [row] = await sql<(RawCachePathRow & { cache_count: number })[]>`
    select s.hash_part, p.store_path, p.nar_hash, p.nar_size, p.file_hash, p.file_size, p.refs, p.deriver, p.ca,
           s.signature, s.created_at, s.last_fetched_at,
           (select count(*)::int from path_signatures o where o.cached_path_id = p.id) as cache_count
    from path_signatures s join cached_paths p on p.id = s.cached_path_id
    where s.cache_id = ${cacheId} and s.hash_part = ${hashPart}`;
  return row ? { ...toCachePathRow(row), cacheCount: row.cache_count } : null;
}
