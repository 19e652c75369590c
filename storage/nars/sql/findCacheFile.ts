// One query on the NAR tables: finds a NAR file a cache serves.
import type { ISql } from 'postgres';

/** The size of a stored NAR file when some path of this cache points at it; null otherwise. */
export async function findCacheFile(sql: ISql, cacheId: string, fileHash: string): Promise<{ fileSize: number } | null> {
  const [row] = await sql<{ file_size: string }[]>`
    select p.file_size
    from cached_paths p
    where p.file_hash = ${fileHash}
      and exists (select 1 from path_signatures s where s.cached_path_id = p.id and s.cache_id = ${cacheId})
    limit 1`;
  return row ? { fileSize: Number(row.file_size) } : null;
}
