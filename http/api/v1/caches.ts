// /caches…: create, list, read, change and delete caches, enable/disable them, their public
// key, and its rotation (kiln extension: key/rotate, keys). Members are in members.ts and invitations.ts, NARs in cacheNars.ts, upstreams in
// cacheUpstreams.ts.
import { CacheName, CreateCacheBody, RotateCacheKeyBody, UpdateCacheBody } from '../../../protocol/index.js';
import type { Principal, Services } from '../../../services/index.js';
import type { Req } from '../../request.js';
import type { Router } from '../../router.js';

export function cachesRoutes(r: Router<Principal>, { caches: { caches, keyRotation } }: Pick<Services, 'caches'>): void {
  const cache = (req: Req<Principal>) => req.param('cache', CacheName);
  r.get('/caches', (req) => caches.list(req.principal));
  r.put('/caches', async (req) => caches.create(req.principal, await req.body(CreateCacheBody)));
  r.get('/caches/:cache', (req) => caches.get(req.principal, cache(req)));
  r.patch('/caches/:cache', async (req) => caches.update(req.principal, cache(req), await req.body(UpdateCacheBody)));
  r.del('/caches/:cache', (req) => caches.remove(req.principal, cache(req)));
  r.post('/caches/:cache/active', (req) => caches.setActive(req.principal, cache(req), true));
  r.del('/caches/:cache/active', (req) => caches.setActive(req.principal, cache(req), false));
  r.get('/caches/:cache/key', (req) => caches.publicKey(req.principal, cache(req)));
  r.get('/caches/:cache/keys', (req) => keyRotation.keys(req.principal, cache(req)));
  r.post('/caches/:cache/key/rotate', async (req) => keyRotation.rotate(req.principal, cache(req), await req.body(RotateCacheKeyBody)));
}
