// The cache services built together from one CacheDeps.
import type { CacheDeps } from './cacheDeps.js';
import { cacheNarsService } from './cacheNars.js';
import { cachesService } from './caches.js';
import { cacheStorageLimits } from './cacheStorage.js';
import { cacheTraffic } from './cacheTraffic.js';
import { cacheUpstreamsService } from './cacheUpstreams.js';
import { createOutboundClient, outboundFetch, type OutboundClient } from '../../storage/index.js';
import { upstreamService } from './upstreams.js';

/** Caches, their NARs, their upstreams and storage limits, built once at start (cli/kiln.ts). */
export function createCacheServices(deps: CacheDeps & { outbound?: OutboundClient }) {
  // Upstream URLs are checked against outbound.allowedNetworks when saved and on every connection.
  const outbound = deps.outbound ?? createOutboundClient({ allowedNetworks: deps.config['outbound.allowedNetworks'] });
  const upstreams = upstreamService({
    sql: deps.sql,
    log: deps.log,
    secretBox: deps.secretBox,
    concurrency: deps.config['cache.upstreamQueryConcurrency'],
    maxNarBytes: deps.config['nar.maxUploadSize'],
    tempFile: (suffix) => deps.nars.staging.tempFile(suffix),
    fetch: outboundFetch(outbound),
  });
  return {
    caches: cachesService(deps),
    cacheNars: cacheNarsService(deps),
    cacheUpstreams: cacheUpstreamsService({ ...deps, outbound, forgetUpstreams: (cacheId) => upstreams.forget(cacheId) }),
    upstreams,
    storageLimits: cacheStorageLimits(deps.sql, deps.config['cache.maxStorageGb']),
    /** cache.narinfo.served and cache.nar.fetched, batched off the serving path */
    traffic: cacheTraffic(deps.events),
  };
}
export type CacheServices = ReturnType<typeof createCacheServices>;
