// Pins (kiln extension, docs/gc.md "Pins"): a pinned path and its runtime closure are never
// collected from the cache. PUT and DELETE need writeStore and take from the writer's own token
// bucket (each pin walks a closure); GET needs viewCache and answers a page at a time.
import { CacheName, PinBody, PinListQuery, StorePathHash } from '../../../protocol/index.js';
import type { Principal, Services } from '../../../services/index.js';
import { rateLimited, type RatePolicy, type RateSubject } from '../../rateLimit.js';
import type { Req } from '../../request.js';
import type { Router } from '../../router.js';

/** Pin writes (PUT and DELETE share it) per user: a burst for a closure's worth, then 5 a second. */
export const pinWriteRateLimit = { name: 'pins.write', burst: 300, refillMs: 200 } satisfies RatePolicy;

/** A user's bucket whichever key or session they use; anyone else's by address (refused later anyway). */
const byUser: RateSubject<Principal> = (req) =>
  req.principal.kind === 'user' ? { key: `user:${req.principal.userId}`, name: `user ${req.principal.username}` } : { key: req.peerAddress, name: req.peerAddress };

export function cachePinsRoutes(r: Router<Principal>, { gc: { pins }, rateLimiter }: Pick<Services, 'gc' | 'rateLimiter'>): void {
  const cache = (req: Req<Principal>) => req.param('cache', CacheName);
  r.get('/caches/:cache/pins', (req) => pins.list(req.principal, cache(req), req.query(PinListQuery)));
  r.put('/caches/:cache/pins/:hash', rateLimited(rateLimiter, pinWriteRateLimit, async (req) =>
    pins.pin(req.principal, cache(req), req.param('hash', StorePathHash), await req.body(PinBody)), byUser));
  r.del('/caches/:cache/pins/:hash', rateLimited(rateLimiter, pinWriteRateLimit, (req) =>
    pins.unpin(req.principal, cache(req), req.param('hash', StorePathHash)), byUser));
}
