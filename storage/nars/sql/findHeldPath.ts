// One query on the NAR tables: finds a cache's copy of a path with its narinfo fields.
import type { ISql } from 'postgres';

export interface HeldPath {
  storePath: string;
  narHash: string;
  narSize: number;
  fileHash: string;
  fileSize: number;
  /** what this cache's narinfo says besides the NAR: base names, sorted */
  references: string[];
  deriver: string | null;
  ca: string | null;
}

/** The version of a store path that a cache holds, or null when it holds none. */
export async function findHeldPath(sql: ISql, cacheId: string, hashPart: string): Promise<HeldPath | null> {
  const [row] = await sql<{ store_path: string; nar_hash: string; nar_size: string; file_hash: string; file_size: string; refs: string[]; deriver: string | null; ca: string | null }[]>`
    select p.store_path, p.nar_hash, p.nar_size, p.file_hash, p.file_size, p.refs, p.deriver, p.ca
    from path_signatures s join cached_paths p on p.id = s.cached_path_id
    where s.cache_id = ${cacheId} and s.hash_part = ${hashPart}`;
  if (!row) return null;
  return {
    storePath: row.store_path, narHash: row.nar_hash, narSize: Number(row.nar_size), fileHash: row.file_hash, fileSize: Number(row.file_size),
    references: row.refs, deriver: row.deriver, ca: row.ca,
  };
}
