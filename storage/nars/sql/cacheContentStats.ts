// One query on the NAR tables: counts a cache's paths and bytes.
import type { ISql } from 'postgres';

export interface CacheContentStats {
  paths: number;
  /** sum of NarSize: what clients unpack */
  narBytes: number;
  /** sum of the stored (zstd) file sizes: what the cache's limit counts */
  storedBytes: number;
  lastUploadAt: Date | null;
  lastFetchedAt: Date | null;
}

export async function cacheContentStats(sql: ISql, cacheId: string): Promise<CacheContentStats> {
  const [row] = await sql<{ paths: string; nar_bytes: string; stored_bytes: string; last_upload_at: Date | null; last_fetched_at: Date | null }[]>`
    select count(*) as paths, coalesce(sum(p.nar_size), 0) as nar_bytes, coalesce(sum(p.file_size), 0) as stored_bytes,
           max(s.created_at) as last_upload_at, max(s.last_fetched_at) as last_fetched_at
    from path_signatures s join cached_paths p on p.id = s.cached_path_id
    where s.cache_id = ${cacheId}`;
  return {
    paths: Number(row?.paths ?? 0),
    narBytes: Number(row?.nar_bytes ?? 0),
    storedBytes: Number(row?.stored_bytes ?? 0),
    lastUploadAt: row?.last_upload_at ?? null,
    lastFetchedAt: row?.last_fetched_at ?? null,
  };
}
