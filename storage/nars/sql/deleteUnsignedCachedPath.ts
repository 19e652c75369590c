// One query on the NAR tables: deletes a cached path once no cache signs it.
import type { ISql } from 'postgres';

/** Deletes a cached path that no cache holds any more; its file hash when it was deleted. */
export async function deleteUnsignedCachedPath(sql: ISql, cachedPathId: string): Promise<string | null> {
  const [row] = await sql<{ file_hash: string }[]>`
    delete from cached_paths p
    where p.id = ${cachedPathId} and not exists (select 1 from path_signatures s where s.cached_path_id = p.id)
    returning p.file_hash`;
  return row?.file_hash ?? null;
}
