import type { ISql } from 'postgres';

export interface PathSignatureInsert {
  cacheId: string;
  hashPart: string;
  cachedPathId: string;
  signature: string;
}

/**
 * Adds the cache's signature row. 'held' when the cache already holds exactly this version,
 * 'conflict' when it holds another NAR of the same store path (the caller rolls back).
 */
export async function insertPathSignature(sql: ISql, row: PathSignatureInsert): Promise<'added' | 'held' | 'conflict'> {
  const [inserted] = await sql<{ cached_path_id: string }[]>`
    insert into path_signatures (cache_id, hash_part, cached_path_id, signature)
    values (${row.cacheId}, ${row.hashPart}, ${row.cachedPathId}, ${row.signature})
    on conflict (cache_id, hash_part) do nothing
    returning cached_path_id`;
  if (inserted) return 'added';
  const [existing] = await sql<{ cached_path_id: string }[]>`
    select cached_path_id from path_signatures where cache_id = ${row.cacheId} and hash_part = ${row.hashPart}`;
  return existing?.cached_path_id === row.cachedPathId ? 'held' : 'conflict';
}
