// cache_upstreams rows (0007_cache_upstreams.sql): the binary caches a cache falls back to.
import type { Queryable } from '../../storage/index.js';

export interface UpstreamRow {
  id: string;
  cache_id: string;
  url: string;
  public_key: string;
  priority: number;
  /** sealed credentials (upstreamCredentials.ts), or null for a public upstream */
  credentials: Buffer | null;
  created_at: Date;
}

/** A cache's upstreams in the order they are asked. */
export async function listUpstreamRows(sql: Queryable, cacheId: string): Promise<UpstreamRow[]> {
  return sql<UpstreamRow[]>`
    select id, cache_id, url, public_key, priority, credentials, created_at from cache_upstreams
    where cache_id = ${cacheId} order by priority, created_at, url`;
}

/**
 * Adds an upstream, or changes the key and priority of the one with the same URL. `credentials`:
 * sealed ones to set, null to remove, undefined to keep what the upstream has.
 */
export async function upsertUpstreamRow(
  sql: Queryable, cacheId: string, up: { url: string; public_key: string; priority: number; credentials?: Buffer | null },
): Promise<void> {
  const keep = up.credentials === undefined;
  await sql`
    insert into cache_upstreams (cache_id, url, public_key, priority, credentials)
    values (${cacheId}, ${up.url}, ${up.public_key}, ${up.priority}, ${up.credentials ?? null})
    on conflict (cache_id, url) do update set public_key = excluded.public_key, priority = excluded.priority,
      credentials = case when ${keep} then cache_upstreams.credentials else excluded.credentials end`;
}

/** false when the cache has no upstream of that id. */
export async function deleteUpstreamRow(sql: Queryable, cacheId: string, id: string): Promise<boolean> {
  const rows = await sql`delete from cache_upstreams where cache_id = ${cacheId} and id = ${id} returning id`;
  return rows.length > 0;
}
