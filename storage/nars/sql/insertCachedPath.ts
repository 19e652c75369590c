// One query on the NAR tables: inserts a cached path.
import type { ISql } from 'postgres';

export interface CachedPathInsert {
  hashPart: string;
  storePath: string;
  narHash: string;
  narSize: number;
  references: string[];
  deriver: string | null;
  ca: string | null;
  fileHash: string;
  fileSize: number;
  listing: string;
}

/**
 * The row of this NAR with this narinfo (its id and stored file), inserting it unless another cache already brought
 * the same version (migration 0017: one row per NAR and what the narinfo says about it). The no-op update locks an
 * existing row until commit, so the sweeper cannot delete it in between.
 */
export async function insertCachedPath(sql: ISql, path: CachedPathInsert): Promise<{ id: string; fileHash: string; fileSize: number; debugIndexed: boolean }> {
  const [row] = await sql<{ id: string; file_hash: string; file_size: string; debug_indexed: boolean }[]>`
    insert into cached_paths (hash_part, store_path, nar_hash, nar_size, refs, deriver, ca, file_hash, file_size, listing)
    values (${path.hashPart}, ${path.storePath}, ${path.narHash}, ${path.narSize}, ${path.references}, ${path.deriver},
            ${path.ca}, ${path.fileHash}, ${path.fileSize}, ${path.listing})
    on conflict (hash_part, nar_hash, narinfo_key) do update set hash_part = excluded.hash_part
    returning id, file_hash, file_size, debug_indexed`;
  return { id: row!.id, fileHash: row!.file_hash, fileSize: Number(row!.file_size), debugIndexed: row!.debug_indexed };
}
