// Queries on the NAR tables: the debug build-ID index (migration 0024). Rows of one cached path are
// written from its listing when it is stored (commitIngest.ts) or by the backfill (the debug index
// sweep), which finds the paths not looked through yet.
import type { ISql } from 'postgres';
import { debugBuildIds, parseNarListing } from '../../../protocol/index.js';

/**
 * Indexes the build IDs of the cached path `cachedPathId` from its listing and marks it indexed; how
 * many build IDs it has. A listing that does not parse indexes nothing (it is what kiln wrote itself).
 */
export async function indexDebugBuildIds(sql: ISql, cachedPathId: string, listing: string): Promise<number> {
  // A NAR without the directory is the rule: no JSON parse for it.
  const parsed = listing.includes('".build-id"') ? parseNarListing(listing) : null;
  const found = parsed?.ok ? debugBuildIds(parsed.value) : [];
  if (found.length > 0) {
    await sql`
      insert into debug_build_ids (build_id, cached_path_id, member)
      select b, ${cachedPathId}, m from unnest(${found.map((f) => f.buildId)}::text[], ${found.map((f) => f.member)}::text[]) as u(b, m)
      on conflict do nothing`;
  }
  await sql`update cached_paths set debug_indexed = true where id = ${cachedPathId} and not debug_indexed`;
  return found.length;
}

/** The next cached paths the backfill looks through, oldest first. */
export async function unindexedCachedPaths(sql: ISql, limit: number): Promise<{ id: string; listing: string }[]> {
  return sql<{ id: string; listing: string }[]>`
    select id, listing from cached_paths where not debug_indexed order by id limit ${limit}`;
}

/** The NAR file and member holding the debug info of `buildId` among the paths the cache holds, or null. */
export async function findDebugInfo(sql: ISql, cacheId: string, buildId: string): Promise<{ fileHash: string; member: string } | null> {
  const [row] = await sql<{ file_hash: string; member: string }[]>`
    select p.file_hash, d.member
    from debug_build_ids d join cached_paths p on p.id = d.cached_path_id
    join path_signatures s on s.cached_path_id = p.id and s.cache_id = ${cacheId}
    where d.build_id = ${buildId}
    order by p.id desc limit 1`;
  return row ? { fileHash: row.file_hash, member: row.member } : null;
}
