// Room for an upload into a full cache (docs/gc.md, "Storage limits"): before refusing with
// cache_full, the least recently used paths outside the live set and pins are removed, by the live
// set the last pass stored, topped up with what evaluations recorded since. The state row is held
// FOR SHARE throughout, so a pass cannot empty the set under this transaction (computeLiveSet
// deletes that row first and waits). Blobs of removed paths are left to the sweeper (after the grace).
import type { Sql, TransactionSql } from 'postgres';
import { leastRecentlyUsed, removePaths, type RemovedPath } from './collectPaths.js';
import { topUpLiveSet } from './liveSet.js';

/**
 * Removes LRU copies of the uploading cache outside the live set until `bytes` are freed (never
 * another cache's: the size is the uploader's claim). Nothing when no pass has stored a whole live set.
 */
export async function evictForRoom(
  sql: Sql, cacheId: string, bytes: number, alongside: (tx: TransactionSql, removed: RemovedPath[]) => Promise<void>,
): Promise<RemovedPath[]> {
  if (bytes <= 0) return [];
  return sql.begin(async (tx) => {
    const [state] = await tx`select 1 from gc_live_state for share`;
    if (!state) return [];
    await topUpLiveSet(tx, false);
    const keys = await leastRecentlyUsed(tx, cacheId, bytes);
    const removed = await removePaths(tx, keys, null);
    await alongside(tx, removed);
    return removed;
  });
}
