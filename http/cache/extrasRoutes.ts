// log/{drv} and debuginfo/{build_id}: debug info from the cache's own debug build-ID index
// (services/caches/debugIndex.ts), else from its upstreams; build logs kiln stored itself when the
// cache holds an output as a project that built it holds it (or the caller may see the build),
// else from its upstreams.
import { ApiError } from '../../protocol/index.js';
import type { Principal } from '../../services/index.js';
import { rateLimited } from '../rateLimit.js';
import type { Router } from '../router.js';
import type { CacheRouteServices } from './cacheDeps.js';
import { readableCache, readableCacheAs } from './cacheGate.js';
import { cacheRateLimits } from './cacheRateLimits.js';
import { noCacheExtras } from './extras.js';
import { bytesReply } from '../reply.js';
import { sandboxed } from './untrustedContent.js';
import { upstreamExtras } from './upstreamExtras.js';

export function extrasRoutes(r: Router<Principal>, services: CacheRouteServices): void {
  // The document Nix's index-debug-info writes, as bare JSON (not the API's envelope).
  const extras = upstreamExtras(services.caches.upstreams, {
    ...noCacheExtras,
    log: async (cache, drv, who) => {
      const log = await services.builds.views.logInCache(who, cache.id, drv);
      return log === null ? null : bytesReply(200, log, { 'Content-Type': 'text/plain; charset=utf-8' });
    },
    debuginfo: async (cache, buildId) => {
      const found = await services.caches.debugInfo(cache.id, buildId);
      return found === null ? null : bytesReply(200, JSON.stringify(found), { 'Content-Type': 'application/json' });
    },
  });
  r.get('/log/:drv', sandboxed(rateLimited(services.rateLimiter, cacheRateLimits.log, async (req) => {
    const { cache, principal } = await readableCacheAs(services.binaryCache, req);
    const drv = req.param<string>('drv');
    const log = await extras.log(cache, drv, principal);
    if (log === null) throw new ApiError('not_found', `cache "${cache.name}" has no build log of ${drv}`);
    return log;
  })));
  r.get('/debuginfo/:buildId', sandboxed(async (req) => {
    const cache = await readableCache(services.binaryCache, req);
    const buildId = req.param<string>('buildId');
    const debuginfo = await extras.debuginfo(cache, buildId);
    if (debuginfo === null) throw new ApiError('not_found', `cache "${cache.name}" has no debug info for build ID ${buildId}`);
    return debuginfo;
  }));
}
