// What the binary cache routes need from the services and storage.
import type { Config } from '../../config/index.js';
import type { BinaryCacheAccess, CacheTraffic, NarUploadService, Upstreams } from '../../services/index.js';
import type { ArchiveProgress, NarStorage, RateLimiter } from '../../storage/index.js';
import type { CidrSet } from '../clientAddress.js';
import type { CacheExtras } from './extras.js';

/** What the binary cache routes are built from (http/routes.ts assembles it). */
export interface CacheRouteDeps {
  access: BinaryCacheAccess;
  nars: NarStorage;
  uploads: NarUploadService;
  rateLimiter: RateLimiter;
  config: Pick<Config, 'nar.smallBytes' | 'nar.maxUploadSize' | 's3.enable' | 'cache.serveArchiveConcurrency'>;
  /** http.localIps: clients that get a cache's local_priority */
  localIps: CidrSet;
  extras: CacheExtras;
  /** the cache's upstream caches: narinfo misses are asked there (services/caches/upstreams.ts) */
  upstreams?: Pick<Upstreams, 'lookupUpstreamNarinfo' | 'knownToHaveNone' | 'openUpstreamNar'>;
  /** cache.narinfo.served and cache.nar.fetched: an append per request, published in batches */
  traffic?: Pick<CacheTraffic, 'served' | 'fetched'>;
  /** watches directory archives being packed (tests: a client's backpressure reaches the packer) */
  archiveProgress?: ArchiveProgress;
}
