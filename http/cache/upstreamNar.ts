// GET upstream/<upstream id>/<hash>/<path>: the NAR file of a narinfo served from an upstream
// cache, proxied through kiln (services/caches/upstreamNarinfo.ts). Streamed with its Content-Length
// (learned by HEAD before the first byte), a single Range as 206, 404 when the upstream does not
// have it. Only files that a verified narinfo of the cache's own upstreams names are fetched.
import { ApiError } from '../../protocol/index.js';
import type { BinaryCache, Principal } from '../../services/index.js';
import { streamReply } from '../reply.js';
import type { Router } from '../router.js';
import { parseRange } from './byteRange.js';
import type { CacheRouteServices } from './cacheDeps.js';
import { readableCache } from './cacheGate.js';

const headersFor = (cache: BinaryCache, path: string) => ({
  'Content-Type': path.includes('.nar') ? 'application/x-nix-nar' : 'application/octet-stream',
  'Accept-Ranges': 'bytes',
  // The upstream decides what lives under a name; an hour is what kiln vouches for.
  'Cache-Control': `${cache.public ? 'public' : 'private'}, max-age=3600`,
});

export function upstreamNarRoutes(r: Router<Principal>, services: CacheRouteServices): void {
  r.get('/upstream/:upstream/:hash/*path', async (req) => {
    const cache = await readableCache(services.binaryCache, req);
    const path = req.param<string>('path');
    const file = await services.caches.upstreams.openUpstreamNar(cache, req.param<string>('upstream'), req.param<string>('hash'), path);
    if (file === null) throw new ApiError('not_found', `no upstream of cache "${cache.name}" has ${path}`);
    const range = parseRange(req.header('range'), file.size);
    if (range.kind === 'unsatisfiable') {
      throw new ApiError('range_not_satisfiable', `the file has ${file.size} bytes; the range ${req.header('range')} lies outside it`, {
        headers: { 'Content-Range': `bytes */${file.size}` },
      });
    }
    if (range.kind === 'part') {
      return streamReply(206, range.end - range.start + 1, file.body({ start: range.start, end: range.end }), {
        ...headersFor(cache, path), 'Content-Range': `bytes ${range.start}-${range.end}/${file.size}`,
      });
    }
    return streamReply(200, file.size, file.body(null), headersFor(cache, path));
  });
}
