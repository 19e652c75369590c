// One query on the NAR tables: signs a path into a cache.
import type { ISql } from 'postgres';

export interface PathSignatureInsert {
  cacheId: string;
  hashPart: string;
  cachedPathId: string;
  signature: string;
}

export type PathSignatureOutcome =
  | { outcome: 'added' | 'held' | 'conflict' }
  /** the cache held the same NAR under another narinfo: its row now points at the new version */
  | { outcome: 'replaced'; previousCachedPathId: string; previousFileHash: string };

/**
 * Adds the cache's signature row. 'held' when the cache already holds exactly this version;
 * 'replaced' when it held the same NAR with another narinfo (a cache's own re-upload replaces its
 * own copy, and nobody else's); 'conflict' when it holds another NAR of the same store path (the
 * caller rolls back).
 */
export async function insertPathSignature(sql: ISql, row: PathSignatureInsert): Promise<PathSignatureOutcome> {
  // A second round only when the cache's row went between the insert and the lookup (a concurrent delete).
  for (let round = 0; ; round++) {
    const [inserted] = await sql<{ cached_path_id: string }[]>`
      insert into path_signatures (cache_id, hash_part, cached_path_id, signature)
      values (${row.cacheId}, ${row.hashPart}, ${row.cachedPathId}, ${row.signature})
      on conflict (cache_id, hash_part) do nothing
      returning cached_path_id`;
    if (inserted) return { outcome: 'added' };
    // Locked: a concurrent upload or delete of this cache's path waits until this one commits.
    const [existing] = await sql<{ cached_path_id: string; file_hash: string; same_nar: boolean }[]>`
      select s.cached_path_id, p.file_hash, p.nar_hash = n.nar_hash as same_nar
      from path_signatures s join cached_paths p on p.id = s.cached_path_id, cached_paths n
      where s.cache_id = ${row.cacheId} and s.hash_part = ${row.hashPart} and n.id = ${row.cachedPathId}
      for update of s`;
    if (existing === undefined) {
      if (round === 0) continue;
      throw new Error(`the signature row of ${row.hashPart} in cache ${row.cacheId} came and went twice during one upload`);
    }
    if (existing.cached_path_id === row.cachedPathId) return { outcome: 'held' };
    if (!existing.same_nar) return { outcome: 'conflict' };
    await sql`
      update path_signatures set cached_path_id = ${row.cachedPathId}, signature = ${row.signature}, created_at = now()
      where cache_id = ${row.cacheId} and hash_part = ${row.hashPart}`;
    return { outcome: 'replaced', previousCachedPathId: existing.cached_path_id, previousFileHash: existing.file_hash };
  }
}
