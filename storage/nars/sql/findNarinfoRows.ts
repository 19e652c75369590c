// One query on the NAR tables: what a cache's narinfos of several paths are rendered from, so that
// the lookups a busy server makes in one turn (its remembered misses expiring) share a round trip.
import type { ISql } from 'postgres';
import { narinfoRow, type NarinfoColumns, type NarinfoRow } from './findNarinfoRow.js';

/** The rows of the paths of `hashParts` the cache signs, by hash part (a path it does not hold is absent). */
export async function findNarinfoRows(sql: ISql, cacheId: string, hashParts: readonly string[]): Promise<Map<string, NarinfoRow>> {
  const rows = await sql<(NarinfoColumns & { hash_part: string })[]>`
    select s.hash_part, p.store_path, p.nar_hash, p.nar_size, p.refs, p.deriver, p.ca, p.file_hash, p.file_size, s.signature, s.previous_signature
    from path_signatures s join cached_paths p on p.id = s.cached_path_id
    where s.cache_id = ${cacheId} and s.hash_part = any(${[...hashParts]}::text[])`;
  return new Map(rows.map((row) => [row.hash_part, narinfoRow(row)]));
}
