// ls/{hash} (and {hash}.ls, where Nix itself looks): the .ls listing kiln made at ingest, byte for
// byte what Nix writes with write-nar-listing.
import { ApiError, isStorePathHashPart } from '../../protocol/index.js';
import type { Principal } from '../../services/index.js';
import { rateLimited } from '../rateLimit.js';
import { bytesReply, type Reply } from '../reply.js';
import type { Req } from '../request.js';
import type { Router } from '../router.js';
import type { CacheRouteServices } from './cacheDeps.js';
import { readableCache } from './cacheGate.js';
import { cacheRateLimits } from './cacheRateLimits.js';

export function narListingRoutes(r: Router<Principal>, services: CacheRouteServices): void {
  const listing = async (req: Req<Principal>): Promise<Reply> => {
    const cache = await readableCache(services.binaryCache, req);
    const hash = req.param<string>('hash');
    const row = isStorePathHashPart(hash) ? await services.nars.reads.listing(cache.id, hash) : null;
    if (row === null) throw new ApiError('not_found', `cache "${cache.name}" has no path ${hash}`);
    return bytesReply(200, row.listing, { 'Content-Type': 'application/json' });
  };
  r.get('/ls/:hash', rateLimited(services.rateLimiter, cacheRateLimits.files, listing));
  r.get('/:hash.ls', rateLimited(services.rateLimiter, cacheRateLimits.files, listing));
}
