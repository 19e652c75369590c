// Pins (docs/gc.md, "Pins"): rows of cache_pins, one per cache and store path hash.
import type { ISql } from 'postgres';

export interface CachePinRow {
  hash_part: string;
  /** the store path when the cache holds it, else null */
  store_path: string | null;
  created_by: string | null;
  created_at: Date;
  expires_at: Date | null;
}

/** Pins a path (or changes its expiry); the row as stored. */
export async function upsertCachePin(sql: ISql, cacheId: string, hashPart: string, createdBy: string | null, expiresAt: Date | null): Promise<void> {
  await sql`
    insert into cache_pins (cache_id, hash_part, created_by, expires_at) values (${cacheId}, ${hashPart}, ${createdBy}, ${expiresAt})
    on conflict (cache_id, hash_part) do update set expires_at = excluded.expires_at`;
}

/** Removes a pin; whether there was one. The pinned closure leaves gc_pinned_paths at the next pass. */
export async function deleteCachePin(sql: ISql, cacheId: string, hashPart: string): Promise<boolean> {
  const rows = await sql`delete from cache_pins where cache_id = ${cacheId} and hash_part = ${hashPart}`;
  return rows.count > 0;
}

/** The cache's pins, expired ones included (they protect nothing), newest first; one page of them, or the one of `hashPart`. */
export async function listCachePins(sql: ISql, cacheId: string, which: { hashPart: string } | { offset: number; limit: number }): Promise<CachePinRow[]> {
  return sql<CachePinRow[]>`
    select cp.hash_part, p.store_path, u.username as created_by, cp.created_at, cp.expires_at
    from cache_pins cp
    left join path_signatures s on s.cache_id = cp.cache_id and s.hash_part = cp.hash_part
    left join cached_paths p on p.id = s.cached_path_id
    left join users u on u.id = cp.created_by
    where cp.cache_id = ${cacheId} ${'hashPart' in which ? sql`and cp.hash_part = ${which.hashPart}` : sql``}
    order by cp.created_at desc, cp.hash_part
    ${'hashPart' in which ? sql`` : sql`offset ${which.offset} limit ${which.limit}`}`;
}

/** How many pins the cache has, expired ones included. */
export async function countCachePins(sql: ISql, cacheId: string): Promise<number> {
  const [row] = await sql<{ n: number }[]>`select count(*)::int as n from cache_pins where cache_id = ${cacheId}`;
  return row?.n ?? 0;
}
