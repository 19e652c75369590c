// One query on the NAR tables: deletes cached paths no signature points to.
import type { ISql } from 'postgres';

/**
 * Deletes cached paths no cache has held since before `olderThan` (their caches were deleted, and
 * the cascade took the signature rows); the file hashes whose blobs may now be unreferenced.
 */
export async function deleteAbandonedCachedPaths(sql: ISql, olderThan: Date, limit = 1000): Promise<string[]> {
  const rows = await sql<{ file_hash: string }[]>`
    delete from cached_paths p
    where p.id in (
      select c.id from cached_paths c
      where c.created_at < ${olderThan}
        and not exists (select 1 from path_signatures s where s.cached_path_id = c.id)
      limit ${limit})
    returning p.file_hash`;
  return [...new Set(rows.map((r) => r.file_hash))];
}
