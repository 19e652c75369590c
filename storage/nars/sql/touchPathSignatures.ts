// One query on the NAR tables: records when paths were last fetched.
import type { ISql } from 'postgres';

/** Sets last_fetched_at on many (cache, hash part) rows in one statement. */
export async function touchPathSignatures(sql: ISql, cacheIds: string[], hashParts: string[], at: Date): Promise<void> {
  if (cacheIds.length === 0) return;
  await sql`
    update path_signatures s set last_fetched_at = ${at}
    from unnest(${cacheIds}::uuid[], ${hashParts}::text[]) as t(cache_id, hash_part)
    where s.cache_id = t.cache_id and s.hash_part = t.hash_part
      and (s.last_fetched_at is null or s.last_fetched_at < ${at})`;
}
