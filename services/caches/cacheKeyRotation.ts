// Signing key rotation (kiln extension; docs/binary-cache.md, "Key rotation"): POST
// /caches/{cache}/key/rotate gives the cache a new key <host>-<cache>-N+1. The old key stays listed
// for an overlap (cache.keyOverlapHours, or the request's overlap_hours), and narinfos carry both
// keys' signatures meanwhile, so clients trusting either keep working; the sign sweep
// (signSweep.ts) re-signs every path the cache holds, woken at once in every process by the
// rotation's `cache.changed` (reason `key`). Uploads after the rotation are signed with the new key.
import { ApiError, type CacheKeysView, type RotateCacheKeyBody } from '../../protocol/index.js';
import { cachePreviousKey, rotateCacheKey, type CacheRow } from '../../storage/index.js';
import type { Clock } from '../../supervisors/index.js';
import type { Principal } from '../access/index.js';
import { demandCache, notFound } from '../access/index.js';
import type { CacheDeps } from './cacheDeps.js';
import { cachePublicKeyText, generateCacheKey, keyGeneration, keyHost } from './cacheKeys.js';

export interface CacheKeyRotationDeps extends Pick<CacheDeps, 'sql' | 'config' | 'secretBox' | 'events'> {
  clock: Clock;
}

export function cacheKeyRotationService({ sql, config, secretBox, events, clock }: CacheKeyRotationDeps) {
  const host = keyHost({ domain: config['domain'], serveUrl: config['serveUrl'] });

  async function keysOf(row: Pick<CacheRow, 'id' | 'key_name' | 'public_key'>, at: Date): Promise<CacheKeysView> {
    const previous = await cachePreviousKey(sql, row.id, at);
    return {
      public_key: cachePublicKeyText(row),
      previous: previous === null ? null : {
        public_key: cachePublicKeyText(previous),
        rotated_at: previous.rotated_at.toISOString(),
        listed_until: previous.listed_until.toISOString(),
      },
    };
  }

  return {
    /** The keys a client may trust now. Anyone who may see the cache (like GET /caches/{cache}/key). */
    async keys(who: Principal, name: string): Promise<CacheKeysView> {
      const { row } = await demandCache(sql, who, name, 'viewCache');
      return keysOf(row, clock.now());
    },

    /**
     * A new key for the cache (manageCache). A state-managed cache may rotate too: the state file
     * declares no keys. Rotating during an overlap ends the older key's overlap at once; so a
     * rotation sooner than cache.keyRotationMinIntervalSecs after the last one is refused (409).
     */
    async rotate(who: Principal, name: string, body: RotateCacheKeyBody): Promise<CacheKeysView> {
      const { row } = await demandCache(sql, who, name, 'manageCache');
      const overlapHours = body.overlap_hours ?? config['cache.keyOverlapHours'];
      const now = clock.now();
      const next = generateCacheKey(secretBox, host, row.name, keyGeneration(row.key_name) + 1);
      await events.transaction(async (tx, emit) => {
        const outcome = await rotateCacheKey(tx, row.id, next, now, new Date(now.getTime() + overlapHours * 3_600_000), config['cache.keyRotationMinIntervalSecs'] * 1000);
        if (!outcome.rotated && outcome.reason === 'gone') throw notFound(`cache "${name}"`);
        if (!outcome.rotated) {
          const seconds = Math.max(1, Math.ceil((outcome.nextAllowedAt.getTime() - now.getTime()) / 1000));
          throw new ApiError('key_rotation_too_soon',
            `cache "${row.name}" rotated its key less than cache.keyRotationMinIntervalSecs (${config['cache.keyRotationMinIntervalSecs']} s) ago; the next rotation is allowed at ${outcome.nextAllowedAt.toISOString()}`,
            { headers: { 'Retry-After': String(seconds) } });
        }
        emit('cache.update', { cache: row.name, cache_id: row.id, public: row.public, changes: ['signing_key'], key_name: next.key_name }, { cacheId: row.id });
        // memos forget the old public key; the sign sweep of every process wakes
        emit('cache.changed', { cache: row.name, reason: 'key' }, { cacheId: row.id });
      });
      return keysOf({ id: row.id, key_name: next.key_name, public_key: next.public_key }, now);
    },
  };
}
