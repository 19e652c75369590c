// One query on the NAR tables: finds the .ls listing of a path a cache holds.
import type { ISql } from 'postgres';

export interface ListingRow {
  listing: string;
  fileHash: string;
  narSize: number;
}

/** The .ls listing of a path this cache holds, with what it takes to read the NAR behind it. */
export async function findListingRow(sql: ISql, cacheId: string, hashPart: string): Promise<ListingRow | null> {
  const [row] = await sql<{ listing: string; file_hash: string; nar_size: string }[]>`
    select p.listing, p.file_hash, p.nar_size
    from path_signatures s join cached_paths p on p.id = s.cached_path_id
    where s.cache_id = ${cacheId} and s.hash_part = ${hashPart}`;
  return row ? { listing: row.listing, fileHash: row.file_hash, narSize: Number(row.nar_size) } : null;
}
