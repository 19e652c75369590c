// log/{drv} and debuginfo/{build_id}: 404 until something provides them (extras.ts).
import type { Principal } from '../../services/index.js';
import { rateLimited } from '../rateLimit.js';
import { errorReply } from '../reply.js';
import type { Router } from '../router.js';
import type { CacheRouteDeps } from './cacheDeps.js';
import { isCache, readableCache } from './cacheGate.js';
import { cacheRateLimits } from './cacheRateLimits.js';
import { sandboxed } from './untrustedContent.js';

export function extrasRoutes(r: Router<Principal>, deps: CacheRouteDeps): void {
  r.get('/log/:drv', sandboxed(rateLimited(deps.rateLimiter, cacheRateLimits.log, async (req) => {
    const cache = await readableCache(deps.access, req);
    if (!isCache(cache)) return cache;
    const drv = req.param<string>('drv');
    return (await deps.extras.log(cache, drv)) ?? errorReply(404, 'not_found', `cache "${cache.name}" has no build log of ${drv}`);
  })));
  r.get('/debuginfo/:buildId', sandboxed(async (req) => {
    const cache = await readableCache(deps.access, req);
    if (!isCache(cache)) return cache;
    const buildId = req.param<string>('buildId');
    return (await deps.extras.debuginfo(cache, buildId)) ?? errorReply(404, 'not_found', `cache "${cache.name}" has no debug info for build ID ${buildId}`);
  }));
}
