// Storage limits of caches as the services see them: bytes left (a new evaluation waits while
// every writable cache of a project has under 10 MiB left) and the refusal of an upload that would
// not fit. The counting is storage/nars/cacheStorageLeft.ts.
import type { ISql } from 'postgres';
import { ApiError } from '../../protocol/index.js';
import type { Sql } from 'postgres';
import { cacheStorage, evictForRoom, type CacheStorage } from '../../storage/index.js';
import { markManyOutputsNotCached } from './evictedOutputs.js';

/** The margin a new evaluation waits on (evaluationWait.ts; spec: "under 10 MiB left"). */
export const LOW_STORAGE_BYTES = 10 * 1024 * 1024;

export interface CacheStorageLimits {
  /** Both limits and what counts against them. */
  storage(cacheId: string): Promise<CacheStorage>;
  /** Bytes the cache may still store; null when no limit applies. */
  bytesLeft(cacheId: string): Promise<number | null>;
  /**
   * Refuses (413 cache_full) an upload of `bytes` that would not fit into the cache, once the least
   * recently used paths outside the live set and pins are removed to make room (docs/gc.md).
   */
  demandRoom(cache: { id: string; name: string }, bytes: number): Promise<void>;
}

export function cacheStorageLimits(sql: Sql, maxStorageGb: number): CacheStorageLimits {
  const storage = (cacheId: string) => cacheStorage(sql, cacheId, maxStorageGb);
  const markEvicted = async (tx: ISql, removed: readonly { storePath: string; deriver: string | null; lastCopy: boolean }[]) => {
    await markManyOutputsNotCached(tx, removed.filter((p) => p.lastCopy));
  };
  /**
   * Frees what the upload needs under each limit it is over, from the uploading cache only, even for
   * the instance limit: the size is the uploader's claim (NarSize, a chunk's offset) before any byte
   * is checked, so evicting across caches would let any tenant with writeStore on a cache of its own
   * wipe every other tenant's collectable paths, one refused upload at a time. Passes still evict
   * across caches for the instance limit.
   */
  const makeRoom = async (cacheId: string, now: CacheStorage, bytes: number): Promise<void> => {
    if (now.maxBytes !== null) await evictForRoom(sql, cacheId, bytes - (now.maxBytes - now.usedBytes), markEvicted);
    if (now.instanceMaxBytes !== null && now.instanceUsedBytes !== null) {
      await evictForRoom(sql, cacheId, bytes - (now.instanceMaxBytes - now.instanceUsedBytes), markEvicted);
    }
  };
  return {
    storage,
    bytesLeft: async (cacheId) => (await storage(cacheId)).leftBytes,
    async demandRoom(cache, bytes) {
      const before = await storage(cache.id);
      if (before.leftBytes === null || bytes <= before.leftBytes) return;
      await makeRoom(cache.id, before, bytes);
      const { leftBytes, maxBytes, instanceMaxBytes } = await storage(cache.id);
      if (leftBytes === null || bytes <= leftBytes) return;
      const limits = [
        ...(maxBytes === null ? [] : [`its own limit of ${maxBytes} bytes (max_storage_bytes)`]),
        ...(instanceMaxBytes === null ? [] : [`the instance's limit of ${maxStorageGb} GiB (cache.maxStorageGb)`]),
      ].join(' and ');
      throw new ApiError('cache_full', `cache "${cache.name}" has ${leftBytes} bytes left under ${limits}; this upload needs ${bytes}. nothing it holds is collectable (every path is live or pinned). Delete paths from it or raise the limit`);
    },
  };
}
