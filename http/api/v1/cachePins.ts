// Pins (kiln extension, docs/gc.md "Pins"): a pinned path and its runtime closure are never
// collected from the cache. PUT and DELETE need writeStore, GET viewCache.
import { CacheName, PinBody, StorePathHash } from '../../../protocol/index.js';
import type { Principal, Services } from '../../../services/index.js';
import type { Req } from '../../request.js';
import type { Router } from '../../router.js';

export function cachePinsRoutes(r: Router<Principal>, { gc: { pins } }: Pick<Services, 'gc'>): void {
  const cache = (req: Req<Principal>) => req.param('cache', CacheName);
  r.get('/caches/:cache/pins', (req) => pins.list(req.principal, cache(req)));
  r.put('/caches/:cache/pins/:hash', async (req) => pins.pin(req.principal, cache(req), req.param('hash', StorePathHash), await req.body(PinBody)));
  r.del('/caches/:cache/pins/:hash', (req) => pins.unpin(req.principal, cache(req), req.param('hash', StorePathHash)));
}
