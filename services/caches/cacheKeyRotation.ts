// Signing key rotation (kiln extension; docs/binary-cache.md, "Key rotation"): POST
// /caches/{cache}/key/rotate gives the cache a new key <host>-<cache>-N+1. The old key stays listed
// for an overlap (cache.keyOverlapHours, or the request's overlap_hours), and narinfos carry both
// keys' signatures meanwhile, so clients trusting either keep working; the sign sweep
// (signSweep.ts) re-signs every path the cache holds, woken at once in every process by the
// rotation's `cache.changed` (reason `key`). Uploads after the rotation are signed with the new key.
// `force` (a leaked key) skips cache.keyRotationMinIntervalSecs: the cache's owner, or a caller with
// superuser powers on any cache; the cache.update event records who forced it.
import { ApiError, type CacheKeysView, type RotateCacheKeyBody } from '../../protocol/index.js';
import { cachePreviousKey, rotateCacheKey, type CacheRow } from '../../storage/index.js';
import type { Clock } from '../../supervisors/index.js';
import type { Principal } from '../access/index.js';
import { demandCache, findCache, isSuperuser, notFound } from '../access/index.js';
import type { CacheDeps } from './cacheDeps.js';
import { demandOwner } from './caches.js';
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

  /**
   * The cache the caller may rotate. A forced rotation is the owner's (owner_only for other
   * admins), or a superuser's on any cache: an operator answering a leak needs no membership.
   */
  async function rotatable(who: Principal, name: string, force: boolean): Promise<{ row: CacheRow; bySuperuser: boolean }> {
    if (force && isSuperuser(who)) {
      const row = await findCache(sql, who, name);
      if (!row) throw notFound(`cache "${name}"`);
      return { row, bySuperuser: true };
    }
    const { row, access } = await demandCache(sql, who, name, 'manageCache');
    if (force) demandOwner(who, row, access, 'a forced key rotation');
    return { row, bySuperuser: false };
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
     * rotation sooner than cache.keyRotationMinIntervalSecs after the last one is refused (409)
     * unless forced (rotatable).
     */
    async rotate(who: Principal, name: string, body: RotateCacheKeyBody): Promise<CacheKeysView> {
      const force = body.force === true;
      const { row, bySuperuser } = await rotatable(who, name, force);
      const overlapHours = body.overlap_hours ?? config['cache.keyOverlapHours'];
      const now = clock.now();
      const next = generateCacheKey(secretBox, host, row.name, keyGeneration(row.key_name) + 1);
      await events.transaction(async (tx, emit) => {
        const outcome = await rotateCacheKey(tx, row.id, next, now, new Date(now.getTime() + overlapHours * 3_600_000), config['cache.keyRotationMinIntervalSecs'] * 1000, force);
        if (!outcome.rotated && outcome.reason === 'gone') throw notFound(`cache "${name}"`);
        if (!outcome.rotated) {
          const seconds = Math.max(1, Math.ceil((outcome.nextAllowedAt.getTime() - now.getTime()) / 1000));
          throw new ApiError('key_rotation_too_soon',
            `cache "${row.name}" rotated its key less than cache.keyRotationMinIntervalSecs (${config['cache.keyRotationMinIntervalSecs']} s) ago; the next rotation is allowed at ${outcome.nextAllowedAt.toISOString()} (after a key leak the cache's owner may send "force": true)`,
            { headers: { 'Retry-After': String(seconds) } });
        }
        // a forced rotation names who forced it and whether it beat the interval (the audit trail)
        const forced = force ? { forced: true, by: who.kind === 'user' ? who.username : null, by_superuser: bySuperuser, interval_overridden: outcome.intervalOverridden } : {};
        emit('cache.update', { cache: row.name, cache_id: row.id, public: row.public, changes: ['signing_key'], key_name: next.key_name, ...forced }, { cacheId: row.id });
        // memos forget the old public key; the sign sweep of every process wakes
        emit('cache.changed', { cache: row.name, reason: 'key' }, { cacheId: row.id });
      });
      return keysOf({ id: row.id, key_name: next.key_name, public_key: next.public_key }, now);
    },
  };
}
