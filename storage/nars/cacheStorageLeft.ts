// How many more bytes a cache may store. Two limits apply together (spec: cache.maxStorageGb, "per-
// cache limits still apply"): the cache's own max_storage_bytes against what the cache holds, and
// the instance-wide cache.maxStorageGb against what all caches hold. Bytes are stored (zstd) file
// sizes: a cache counts every path it holds, the instance counts each blob once, as it is stored.
// Uploads are refused when they would not fit (services/caches/cacheStorage.ts); a new evaluation waits
// while every writable cache of a project has under 10 MiB left.
import type { ISql } from 'postgres';

/** cache.maxStorageGb counts in GiB (2^30 bytes), like the sizes operators read from df -h. */
export const STORAGE_GB = 1024 ** 3;

export interface CacheStorage {
  /** what the cache holds: the sum of its paths' stored file sizes */
  usedBytes: number;
  /** the cache's own limit, or null */
  maxBytes: number | null;
  /** what the whole instance stores (each blob once); null when cache.maxStorageGb is 0 */
  instanceUsedBytes: number | null;
  /** cache.maxStorageGb in bytes, or null when 0 */
  instanceMaxBytes: number | null;
  /** the smaller of the two margins, never negative; null when no limit applies */
  leftBytes: number | null;
}

/** Both limits and what counts against them. A cache that does not exist has 0 bytes left. */
export async function cacheStorage(sql: ISql, cacheId: string, maxStorageGb = 0): Promise<CacheStorage> {
  const [cache] = await sql<{ max_storage_bytes: string | null; used: string }[]>`
    select c.max_storage_bytes,
           (select coalesce(sum(p.file_size), 0) from path_signatures s join cached_paths p on p.id = s.cached_path_id
            where s.cache_id = c.id) as used
    from caches c where c.id = ${cacheId}`;
  if (!cache) return { usedBytes: 0, maxBytes: null, instanceUsedBytes: null, instanceMaxBytes: null, leftBytes: 0 };
  const usedBytes = Number(cache.used);
  const maxBytes = cache.max_storage_bytes === null ? null : Number(cache.max_storage_bytes);
  let instanceUsedBytes: number | null = null;
  const instanceMaxBytes = maxStorageGb > 0 ? maxStorageGb * STORAGE_GB : null;
  if (instanceMaxBytes !== null) {
    const [row] = await sql<{ used: string }[]>`
      select coalesce(sum(file_size), 0) as used from (select max(file_size) as file_size from cached_paths group by file_hash) blobs`;
    instanceUsedBytes = Number(row?.used ?? 0);
  }
  const margins = [
    ...(maxBytes === null ? [] : [maxBytes - usedBytes]),
    ...(instanceMaxBytes === null || instanceUsedBytes === null ? [] : [instanceMaxBytes - instanceUsedBytes]),
  ];
  const leftBytes = margins.length === 0 ? null : Math.max(0, Math.min(...margins));
  return { usedBytes, maxBytes, instanceUsedBytes, instanceMaxBytes, leftBytes };
}

/** Bytes the cache may still store; null when neither limit is set. Pass config['cache.maxStorageGb']. */
export async function cacheStorageLeft(sql: ISql, cacheId: string, maxStorageGb = 0): Promise<number | null> {
  return (await cacheStorage(sql, cacheId, maxStorageGb)).leftBytes;
}
