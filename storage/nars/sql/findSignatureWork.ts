// One query on the NAR tables: the sign sweep's next slice of one cache's signature rows that are not
// signed the way the cache's keys say (services/caches/signSweep.ts): the signature not by the
// current key, the previous signature missing or by another key while a previous key is listed,
// or left over when none is.
import type { ISql } from 'postgres';

export interface SignatureWork {
  hashPart: string;
  cachedPathId: string;
  storePath: string;
  narHash: string;
  narSize: number;
  references: string[];
  signature: string;
  previousSignature: string | null;
}

export interface SignatureWorkQuery {
  cacheId: string;
  /** the cache's key name now */
  keyName: string;
  /** its previous key's name while that is listed, else null */
  previousKeyName: string | null;
  /** the walk's position: rows after this hash part (keyset order of the primary key) */
  after: string;
  limit: number;
}

/** `left(…) <>` rather than LIKE: a key name may hold `_`, a LIKE wildcard. */
export async function findSignatureWork(sql: ISql, q: SignatureWorkQuery): Promise<SignatureWork[]> {
  const current = `${q.keyName}:`;
  const previous = q.previousKeyName === null ? null : `${q.previousKeyName}:`;
  const rows = await sql<{ hash_part: string; cached_path_id: string; store_path: string; nar_hash: string; nar_size: string; refs: string[]; signature: string; previous_signature: string | null }[]>`
    select s.hash_part, s.cached_path_id, p.store_path, p.nar_hash, p.nar_size, p.refs, s.signature, s.previous_signature
    from path_signatures s join cached_paths p on p.id = s.cached_path_id
    where s.cache_id = ${q.cacheId} and s.hash_part > ${q.after}
      and (left(s.signature, ${current.length}) <> ${current}
        or (${previous}::text is null and s.previous_signature is not null)
        or (${previous}::text is not null and (s.previous_signature is null or left(s.previous_signature, ${previous?.length ?? 0}) <> ${previous})))
    order by s.hash_part
    limit ${q.limit}`;
  return rows.map((r) => ({
    hashPart: r.hash_part,
    cachedPathId: r.cached_path_id,
    storePath: r.store_path,
    narHash: r.nar_hash,
    narSize: Number(r.nar_size),
    references: r.refs,
    signature: r.signature,
    previousSignature: r.previous_signature,
  }));
}
