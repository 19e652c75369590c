// A cache's upstream caches: GET lists, PUT adds (or updates the one with the same URL), DELETE
// /{id} removes. Each answers with the list as it is afterwards.
import { CacheName, UpstreamBody } from '../../../protocol/index.js';
import type { Principal, Services } from '../../../services/index.js';
import type { Req } from '../../request.js';
import type { Router } from '../../router.js';

export function cacheUpstreamsRoutes(r: Router<Principal>, { caches: { cacheUpstreams } }: Pick<Services, 'caches'>): void {
  const cache = (req: Req<Principal>) => req.param('cache', CacheName);
  r.get('/caches/:cache/upstreams', (req) => cacheUpstreams.list(req.principal, cache(req)));
  r.put('/caches/:cache/upstreams', async (req) => cacheUpstreams.put(req.principal, cache(req), await req.body(UpstreamBody)));
  r.del('/caches/:cache/upstreams/:id', (req) => cacheUpstreams.remove(req.principal, cache(req), req.param<string>('id')));
}
