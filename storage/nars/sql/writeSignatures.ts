// One query on the NAR tables: the sign sweep's new signatures for a slice of one cache's rows.
import type { ISql } from 'postgres';

export interface SignatureWrite {
  hashPart: string;
  /** the version the signatures were made over; a row pointing elsewhere now is left alone */
  cachedPathId: string;
  /** the signature read with the work: a row an upload re-signed meanwhile is left alone */
  readSignature: string;
  signature: string;
  previousSignature: string | null;
}

/** The hash parts whose rows were written; rows that changed since they were read are skipped (the next pass sees them). */
export async function writeSignatures(sql: ISql, cacheId: string, writes: readonly SignatureWrite[]): Promise<string[]> {
  if (writes.length === 0) return [];
  const rows = await sql<{ hash_part: string }[]>`
    update path_signatures s set signature = w.signature, previous_signature = w.previous_signature
    from unnest(${writes.map((w) => w.hashPart)}::text[], ${writes.map((w) => w.cachedPathId)}::bigint[],
                ${writes.map((w) => w.readSignature)}::text[], ${writes.map((w) => w.signature)}::text[],
                ${writes.map((w) => w.previousSignature) as string[]}::text[])
      as w(hash_part, cached_path_id, read_signature, signature, previous_signature)
    where s.cache_id = ${cacheId} and s.hash_part = w.hash_part and s.cached_path_id = w.cached_path_id
      and s.signature = w.read_signature
    returning s.hash_part`;
  return rows.map((r) => r.hash_part);
}
