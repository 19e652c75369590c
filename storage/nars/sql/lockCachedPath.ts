// One query on the NAR tables: locks a cached path row for a change.
import type { ISql } from 'postgres';
import type { CachedPathInsert } from './insertCachedPath.js';

/**
 * The row of this exact NAR of a store path with exactly this narinfo (migration 0017), locked
 * until the transaction ends (so the sweeper cannot delete it meanwhile), or null when no cache
 * brought this version yet.
 */
export async function lockCachedPath(sql: ISql, path: Pick<CachedPathInsert, 'hashPart' | 'narHash' | 'storePath' | 'references' | 'deriver' | 'ca'>): Promise<{ id: string; fileHash: string; fileSize: number } | null> {
  const [row] = await sql<{ id: string; file_hash: string; file_size: string }[]>`
    select id, file_hash, file_size from cached_paths
    where hash_part = ${path.hashPart} and nar_hash = ${path.narHash}
      and narinfo_key = cached_path_narinfo_key(${path.storePath}, ${path.references}::text[], ${path.deriver}, ${path.ca})
    for update`;
  return row ? { id: row.id, fileHash: row.file_hash, fileSize: Number(row.file_size) } : null;
}
