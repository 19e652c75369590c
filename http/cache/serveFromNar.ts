// serve/{hash}/{path}: one file out of a cached path, or a directory as tar.zst, so a browser or
// curl can fetch a single artefact without Nix. Relative symlinks inside the path redirect to their
// target; anything leading outside the path is a 404. Every answer is sandboxed and active types are
// downloads (untrustedContent.ts): the bytes are a tenant's, the origin is kiln's.
import { posix } from 'node:path';
import { ApiError, isStorePathHashPart, lookupNarListing, parseNarListing } from '../../protocol/index.js';
import type { Principal } from '../../services/index.js';
import { directoryArchive, narSlice } from '../../storage/index.js';
import { rateLimited } from '../rateLimit.js';
import { chunkedReply, emptyReply, streamReply, type Reply } from '../reply.js';
import type { Req } from '../request.js';
import type { Router } from '../router.js';
import { ArchiveBuilds } from './archiveBuilds.js';
import type { CacheRouteServices } from './cacheDeps.js';
import { readableCache } from './cacheGate.js';
import { cacheRateLimits } from './cacheRateLimits.js';
import { contentTypeOf } from './contentType.js';
import { SANDBOX_HEADERS, sandboxed, untrustedFileHeaders } from './untrustedContent.js';

/** Seconds a client refused for want of an archive place is told to wait. */
const ARCHIVE_RETRY_SECS = 5;

const encodePath = (path: string) => path.split('/').map(encodeURIComponent).join('/');

/**
 * The archive, packed only once a client reads it: the place is taken at the first chunk (HEAD and
 * a request that never starts take none) and given back when the stream ends, fails or is dropped.
 * Refused before the first byte, the 503 is still an ordinary error answer.
 */
async function* boundedArchive(builds: ArchiveBuilds, pack: () => AsyncGenerator<Uint8Array>): AsyncGenerator<Uint8Array> {
  const finish = builds.tryStart();
  if (finish === null) {
    throw new ApiError('archive_busy', `${builds.limit} directory archives are being packed (cache.serveArchiveConcurrency); retry in ${ARCHIVE_RETRY_SECS} s or fetch the NAR`, {
      headers: { 'Retry-After': String(ARCHIVE_RETRY_SECS), ...SANDBOX_HEADERS },
    });
  }
  try {
    yield* pack();
  } finally {
    finish();
  }
}

export function serveRoutes(r: Router<Principal>, services: CacheRouteServices): void {
  const builds = new ArchiveBuilds(services.config['cache.serveArchiveConcurrency']);
  const handler = async (req: Req<Principal>): Promise<Reply> => {
    const cache = await readableCache(services.binaryCache, req);
    const hash = req.param<string>('hash');
    const path = req.params['path'] ?? '';
    const notFound = () => new ApiError('not_found', `cache "${cache.name}" has no ${hash}/${path}`);
    const row = isStorePathHashPart(hash) ? await services.nars.reads.listing(cache.id, hash) : null;
    if (row === null) throw notFound();
    const listing = parseNarListing(row.listing);
    if (!listing.ok) throw new Error(`the stored listing of ${hash} does not parse: ${listing.field}: ${listing.reason}`);
    const found = lookupNarListing(listing.value, path);
    if (found === undefined) throw notFound();
    const blobs = services.nars.blobs;
    switch (found.type) {
      case 'regular':
        return streamReply(200, found.size, narSlice(blobs, row.fileHash, found.narOffset, found.size), {
          ...untrustedFileHeaders(contentTypeOf(path), path.slice(path.lastIndexOf('/') + 1)),
          'X-Executable': found.executable ? '1' : '0',
        });
      case 'symlink': {
        const clean = path.split('/').filter((s) => s !== '').join('/');
        const target = posix.normalize(posix.join(posix.dirname(clean), found.target));
        if (found.target.startsWith('/') || target === '..' || target.startsWith('../')) throw notFound();
        return emptyReply(302, { Location: `/cache/${encodeURIComponent(cache.name)}/serve/${hash}/${encodePath(target === '.' ? '' : target)}` });
      }
      case 'directory': {
        // Streamed with chunked encoding: the compressed size is known only once it is packed.
        const prefix = path.split('/').filter((s) => s !== '').join('/');
        const name = prefix.split('/').pop() || hash;
        const headers = untrustedFileHeaders('application/zstd', `${name}.tar.zst`);
        const pack = () => directoryArchive(blobs, row.fileHash, prefix, services.archiveProgress);
        return chunkedReply(200, req.isHead ? noBody() : boundedArchive(builds, pack), headers);
      }
    }
  };
  // The rest parameter also matches nothing: serve/{hash} is the path's root.
  r.get('/serve/:hash/*path', sandboxed(rateLimited(services.rateLimiter, cacheRateLimits.files, handler)));
}

/** A HEAD answer's body: never read (respond.ts sends headers only), and packs nothing if it were. */
async function* noBody(): AsyncGenerator<Uint8Array> {}
