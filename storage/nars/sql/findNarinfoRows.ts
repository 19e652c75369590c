// One query on the NAR tables: what a cache's narinfos of some paths are rendered from, in one
// round trip for the lookups a busy server makes in one turn (its remembered misses expiring, the
// serving threads' batched renewals: storage/nars/narReads.ts).
import type { ISql } from 'postgres';

/** What a cache's narinfo is made of: the path's row and this cache's signatures. */
export interface NarinfoRow {
  storePath: string;
  narHash: string;
  narSize: number;
  references: string[];
  deriver: string | null;
  ca: string | null;
  fileHash: string;
  fileSize: number;
  signature: string;
  /** by the cache's previous key during a key rotation's overlap (migration 0023), else null */
  previousSignature: string | null;
}

/** The columns selected. */
interface NarinfoColumns {
  store_path: string;
  nar_hash: string;
  nar_size: string;
  refs: string[];
  deriver: string | null;
  ca: string | null;
  file_hash: string;
  file_size: string;
  signature: string;
  previous_signature: string | null;
}

function narinfoRow(row: NarinfoColumns): NarinfoRow {
  return {
    storePath: row.store_path,
    narHash: row.nar_hash,
    narSize: Number(row.nar_size),
    references: row.refs,
    deriver: row.deriver,
    ca: row.ca,
    fileHash: row.file_hash,
    fileSize: Number(row.file_size),
    signature: row.signature,
    previousSignature: row.previous_signature,
  };
}

/** The rows of the paths of `hashParts` the cache signs, by hash part (a path it does not hold is absent). */
export async function findNarinfoRows(sql: ISql, cacheId: string, hashParts: readonly string[]): Promise<Map<string, NarinfoRow>> {
  const rows = await sql<(NarinfoColumns & { hash_part: string })[]>`
    select s.hash_part, p.store_path, p.nar_hash, p.nar_size, p.refs, p.deriver, p.ca, p.file_hash, p.file_size, s.signature, s.previous_signature
    from path_signatures s join cached_paths p on p.id = s.cached_path_id
    where s.cache_id = ${cacheId} and s.hash_part = any(${[...hashParts]}::text[])`;
  return new Map(rows.map((row) => [row.hash_part, narinfoRow(row)]));
}
