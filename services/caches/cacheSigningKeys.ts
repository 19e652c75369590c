// The one reader of caches.secret_key: a cache's private signing key, opened from its sealed
// column only where a narinfo is signed (an ingest, an adopted upstream narinfo, the sign sweep).
// Everything else handles caches by id and name, so routes and their replies never hold a private key.
import type { SigningKey } from '../../protocol/index.js';
import { cachePreviousSealedKey, cacheSealedKey, type SecretBox } from '../../storage/index.js';
import { openCacheKey } from './cacheKeys.js';
import type { Queryable } from '../../storage/index.js';

export interface CacheSigningKeys {
  /** The signing key of the cache `cacheId`; an Error when the cache is gone. */
  of(cacheId: string): Promise<SigningKey>;
  /** The key the cache signed with before its last rotation while it is listed at `at`, else null. */
  previous(cacheId: string, at: Date): Promise<SigningKey | null>;
}

export function cacheSigningKeys(sql: Queryable, box: SecretBox): CacheSigningKeys {
  return {
    async of(cacheId) {
      const row = await cacheSealedKey(sql, cacheId);
      if (!row) throw new Error(`cache ${cacheId} is gone; it has no signing key`);
      return openCacheKey(box, row);
    },
    async previous(cacheId, at) {
      const row = await cachePreviousSealedKey(sql, cacheId, at);
      return row === null ? null : openCacheKey(box, row);
    },
  };
}
