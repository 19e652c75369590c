// Storage limits of caches as the services see them: bytes left (a new evaluation waits while
// every writable cache of a project has under 10 MiB left) and the refusal of an upload that would
// not fit. The counting is storage/nars/cacheStorageLeft.ts.
import type { ISql } from 'postgres';
import { ApiError } from '../../protocol/index.js';
import { cacheStorage, type CacheStorage } from '../../storage/index.js';

/** The margin a new evaluation waits on (evaluationWait.ts; spec: "under 10 MiB left"). */
export const LOW_STORAGE_BYTES = 10 * 1024 * 1024;

export interface CacheStorageLimits {
  /** Both limits and what counts against them. */
  storage(cacheId: string): Promise<CacheStorage>;
  /** Bytes the cache may still store; null when no limit applies. */
  bytesLeft(cacheId: string): Promise<number | null>;
  /** Refuses (413 cache_full) an upload of `bytes` that would not fit into the cache. */
  demandRoom(cache: { id: string; name: string }, bytes: number): Promise<void>;
}

export function cacheStorageLimits(sql: ISql, maxStorageGb: number): CacheStorageLimits {
  const storage = (cacheId: string) => cacheStorage(sql, cacheId, maxStorageGb);
  return {
    storage,
    bytesLeft: async (cacheId) => (await storage(cacheId)).leftBytes,
    async demandRoom(cache, bytes) {
      const { leftBytes, maxBytes, instanceMaxBytes } = await storage(cache.id);
      if (leftBytes === null || bytes <= leftBytes) return;
      const limits = [
        ...(maxBytes === null ? [] : [`its own limit of ${maxBytes} bytes (max_storage_bytes)`]),
        ...(instanceMaxBytes === null ? [] : [`the instance's limit of ${maxStorageGb} GiB (cache.maxStorageGb)`]),
      ].join(' and ');
      throw new ApiError('cache_full', `cache "${cache.name}" has ${leftBytes} bytes left under ${limits}; this upload needs ${bytes}. Delete paths from it or raise the limit`);
    },
  };
}
