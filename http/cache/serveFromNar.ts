// serve/{hash}/{path}: one file out of a cached path, or a directory as tar.zst, so a browser or
// curl can fetch a single artefact without Nix. Relative symlinks inside the path redirect to their
// target; anything leading outside the path is a 404.
import { posix } from 'node:path';
import { isStorePathHashPart, lookupNarListing, parseNarListing } from '../../protocol/index.js';
import type { Principal } from '../../services/index.js';
import { narSlice, packDirectory } from '../../storage/index.js';
import { rateLimited } from '../rateLimit.js';
import { bytesReply, emptyReply, errorReply, streamReply, type Reply } from '../reply.js';
import type { Req } from '../request.js';
import type { Router } from '../router.js';
import type { CacheRouteDeps } from './cacheDeps.js';
import { isCache, readableCache } from './cacheGate.js';
import { cacheRateLimits } from './cacheRateLimits.js';
import { contentTypeOf } from './contentType.js';

/** A directory is packed in memory; past this many uncompressed bytes, fetch the NAR instead. */
export const MAX_PACKED_DIRECTORY_BYTES = 256 * 1024 * 1024;

const encodePath = (path: string) => path.split('/').map(encodeURIComponent).join('/');

export function serveRoutes(r: Router<Principal>, deps: CacheRouteDeps): void {
  const handler = async (req: Req<Principal>): Promise<Reply> => {
    const cache = await readableCache(deps.access, req);
    if (!isCache(cache)) return cache;
    const hash = req.param<string>('hash');
    const path = req.params['path'] ?? '';
    const notFound = () => errorReply(404, 'not_found', `cache "${cache.name}" has no ${hash}/${path}`);
    const row = isStorePathHashPart(hash) ? await deps.nars.reads.listing(cache.id, hash) : null;
    if (row === null) return notFound();
    const listing = parseNarListing(row.listing);
    if (!listing.ok) throw new Error(`the stored listing of ${hash} does not parse: ${listing.field}: ${listing.reason}`);
    const found = lookupNarListing(listing.value, path);
    if (found === undefined) return notFound();
    const blobs = deps.nars.blobs;
    switch (found.type) {
      case 'regular':
        return streamReply(200, found.size, narSlice(blobs, row.fileHash, found.narOffset, found.size), {
          'Content-Type': contentTypeOf(path),
          'X-Executable': found.executable ? '1' : '0',
        });
      case 'symlink': {
        const clean = path.split('/').filter((s) => s !== '').join('/');
        const target = posix.normalize(posix.join(posix.dirname(clean), found.target));
        if (found.target.startsWith('/') || target === '..' || target.startsWith('../')) return notFound();
        return emptyReply(302, { Location: `/cache/${encodeURIComponent(cache.name)}/serve/${hash}/${encodePath(target === '.' ? '' : target)}` });
      }
      case 'directory': {
        const prefix = path.split('/').filter((s) => s !== '').join('/');
        const packed = await packDirectory(blobs, row.fileHash, prefix, MAX_PACKED_DIRECTORY_BYTES);
        if (packed === null) {
          return errorReply(413, 'directory_too_large', `${hash}/${path} holds more than ${MAX_PACKED_DIRECTORY_BYTES} bytes; fetch the whole NAR instead`);
        }
        const name = (prefix.split('/').pop() || hash).replace(/[^A-Za-z0-9._+-]/g, '_');
        return bytesReply(200, packed, { 'Content-Type': 'application/zstd', 'Content-Disposition': `attachment; filename="${name}.tar.zst"` });
      }
    }
  };
  // The rest parameter also matches nothing: serve/{hash} is the path's root.
  r.get('/serve/:hash/*path', rateLimited(deps.rateLimiter, cacheRateLimits.files, handler));
}
