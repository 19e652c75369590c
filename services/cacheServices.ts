import type { CacheDeps } from './cacheDeps.js';
import { cacheNarsService } from './cacheNars.js';
import { cachesService } from './caches.js';
import { cacheStorageLimits } from './cacheStorage.js';
import { cacheTraffic } from './cacheTraffic.js';
import { cacheUpstreamsService } from './cacheUpstreams.js';
import type { FetchFunction } from './upstreamFetch.js';
import { upstreamService } from './upstreams.js';

/** Caches, their NARs, their upstreams and storage limits, built once at start (cli/kiln.ts). */
export function createCacheServices(deps: CacheDeps & { fetch?: FetchFunction }) {
  const upstreams = upstreamService({
    sql: deps.sql,
    log: deps.log,
    secretBox: deps.secretBox,
    concurrency: deps.config['cache.upstreamQueryConcurrency'],
    maxNarBytes: deps.config['nar.maxUploadSize'],
    tempFile: (suffix) => deps.nars.staging.tempFile(suffix),
    ...(deps.fetch === undefined ? {} : { fetch: deps.fetch }),
  });
  return {
    caches: cachesService(deps),
    cacheNars: cacheNarsService(deps),
    cacheUpstreams: cacheUpstreamsService({ ...deps, forgetUpstreams: (cacheId) => upstreams.forget(cacheId) }),
    upstreams,
    storageLimits: cacheStorageLimits(deps.sql, deps.config['cache.maxStorageGb']),
    /** cache.narinfo.served and cache.nar.fetched, batched off the serving path */
    traffic: cacheTraffic(deps.events),
  };
}
export type CacheServices = ReturnType<typeof createCacheServices>;
