// GET {hash}.narinfo: the signed narinfo, from the hot cache when this process has seen it.
import { isStorePathHashPart } from '../../protocol/index.js';
import type { Principal } from '../../services/index.js';
import { bytesReply, errorReply } from '../reply.js';
import type { Router } from '../router.js';
import type { CacheRouteDeps } from './cacheDeps.js';
import { isCache, readableCache } from './cacheGate.js';

const NARINFO_HEADERS = { 'Content-Type': 'text/x-nix-narinfo', 'X-Cache': 'HIT' };
/** from an upstream cache (services/upstreams.ts) */
const UPSTREAM_NARINFO_HEADERS = { 'Content-Type': 'text/x-nix-narinfo', 'X-Cache': 'MISS' };

export function narinfoRoutes(r: Router<Principal>, deps: CacheRouteDeps): void {
  r.get('/:hash.narinfo', async (req) => {
    const cache = await readableCache(deps.access, req);
    if (!isCache(cache)) return cache;
    const hash = req.param<string>('hash');
    const valid = isStorePathHashPart(hash);
    const text = valid ? await deps.nars.reads.narinfo(cache.id, hash) : null;
    if (text !== null) return bytesReply(200, text, NARINFO_HEADERS);
    const upstream = valid && deps.upstreams ? await deps.upstreams.lookupUpstreamNarinfo(cache, hash) : null;
    if (upstream !== null) return bytesReply(200, upstream, UPSTREAM_NARINFO_HEADERS);
    return errorReply(404, 'not_found', `cache "${cache.name}" has no path ${hash}`);
  });
}
