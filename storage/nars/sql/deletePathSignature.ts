// One query on the NAR tables: deletes one cache's copy of a path.
import type { ISql } from 'postgres';

/** Removes a cache's signature row; the cached path's id, file hash and NarHash when there was one. */
export async function deletePathSignature(sql: ISql, cacheId: string, hashPart: string): Promise<{ cachedPathId: string; fileHash: string; narHash: string } | null> {
  const [row] = await sql<{ cached_path_id: string; file_hash: string; nar_hash: string }[]>`
    delete from path_signatures s using cached_paths p
    where p.id = s.cached_path_id and s.cache_id = ${cacheId} and s.hash_part = ${hashPart}
    returning s.cached_path_id, p.file_hash, p.nar_hash`;
  return row ? { cachedPathId: row.cached_path_id, fileHash: row.file_hash, narHash: row.nar_hash } : null;
}
