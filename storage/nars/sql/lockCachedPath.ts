import type { ISql } from 'postgres';

/**
 * The row of this exact NAR of a store path, locked until the transaction ends (so the sweeper
 * cannot delete it meanwhile), or null when no cache brought it yet.
 */
export async function lockCachedPath(sql: ISql, hashPart: string, narHash: string): Promise<{ id: string; fileHash: string; fileSize: number } | null> {
  const [row] = await sql<{ id: string; file_hash: string; file_size: string }[]>`
    select id, file_hash, file_size from cached_paths where hash_part = ${hashPart} and nar_hash = ${narHash} for update`;
  return row ? { id: row.id, fileHash: row.file_hash, fileSize: Number(row.file_size) } : null;
}
