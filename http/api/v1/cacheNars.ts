// The NAR management API: list (filtered, sorted, paged), show, delete and statistics. Uploads
// (POST /caches/{cache}/nars, chunks, finalize) are narUploads.ts, on the same paths.
import { CacheName, NarListQuery, StorePathHash } from '../../../protocol/index.js';
import type { Principal, Services } from '../../../services/index.js';
import type { Req } from '../../request.js';
import type { Router } from '../../router.js';

export function cacheNarsRoutes(r: Router<Principal>, { caches: { cacheNars } }: Pick<Services, 'caches'>): void {
  const cache = (req: Req<Principal>) => req.param('cache', CacheName);
  r.get('/caches/:cache/nars', (req) => cacheNars.list(req.principal, cache(req), req.query(NarListQuery)));
  r.get('/caches/:cache/nars/:hash', (req) => cacheNars.show(req.principal, cache(req), req.param('hash', StorePathHash)));
  r.del('/caches/:cache/nars/:hash', (req) => cacheNars.remove(req.principal, cache(req), req.param('hash', StorePathHash)));
  r.get('/caches/:cache/stats', (req) => cacheNars.stats(req.principal, cache(req)));
}
