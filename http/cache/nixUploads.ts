// `nix copy --to http://…/cache/{cache}` (beyond the spec): Nix PUTs the NAR file, then its
// narinfo; kiln stages the first and on the second checks the NAR against the narinfo, re-signs
// it with the cache's key and ignores the client's Sig lines. Every refusal is a 4xx: Nix 2.8
// hangs retrying a 5xx answer to an upload.
import type { Principal } from '../../services/index.js';
import { emptyReply } from '../reply.js';
import type { Router } from '../router.js';
import type { CacheRouteServices } from './cacheDeps.js';
import { writableCache } from './cacheGate.js';

const MAX_NARINFO_BYTES = 1 << 20;

async function drain(body: AsyncIterable<Uint8Array>): Promise<void> {
  for await (const _ of body) void _;
}

export function nixUploadRoutes(r: Router<Principal>, services: CacheRouteServices): void {
  // Nix writes nix-cache-info only when it cannot read one, which never happens here: accepted, kept as it is.
  r.put('/nix-cache-info', async (req) => {
    await writableCache(services.binaryCache, req);
    return emptyReply(200);
  }, { body: 'buffer', maxBody: 64 * 1024 });

  r.put('/nar/:file', async (req) => {
    const cache = await writableCache(services.binaryCache, req);
    const declared = Number(req.header('content-length') ?? Number.NaN);
    await services.narUploads.nixPutNar(cache, req.param<string>('file'), Number.isSafeInteger(declared) && declared >= 0 ? declared : null, req.stream());
    return emptyReply(200);
  }, { body: 'stream', maxBody: services.config['nar.maxUploadSize'] });

  r.put('/:hash.narinfo', async (req) => {
    const cache = await writableCache(services.binaryCache, req);
    const text = (await req.bytes()).toString('utf8');
    await services.narUploads.nixPutNarinfo(cache, req.param<string>('hash'), text);
    return emptyReply(200);
  }, { body: 'buffer', maxBody: MAX_NARINFO_BYTES });

  // With write-nar-listing Nix uploads its own listing; kiln made one at ingest and keeps that.
  r.put('/:hash.ls', async (req) => {
    await writableCache(services.binaryCache, req);
    await drain(req.stream());
    return emptyReply(200);
  }, { body: 'stream', maxBody: services.config['nar.maxUploadSize'] });
}
