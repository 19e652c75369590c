// The cache services built together from one CacheDeps.
import type { CacheDeps } from './cacheDeps.js';
import { cacheNarsService } from './cacheNars.js';
import { cachesService } from './caches.js';
import { cacheTraffic } from './cacheTraffic.js';
import { cacheUpstreamsService } from './cacheUpstreams.js';
import { createOutboundClient, outboundFetch, type EventBus, type KilnMetrics, type OutboundClient, type TrafficCounters } from '../../storage/index.js';
import { createUpstreams } from './upstreams.js';
import { tracedFetch } from './tracedFetch.js';
import type { StageTracer } from '../../config/index.js';
import { cacheKeyRotationService } from './cacheKeyRotation.js';
import { debugInfoDocument } from './debugIndex.js';
import type { Clock } from '../../supervisors/index.js';

export interface CacheServicesDeps extends CacheDeps {
  /** where upstream lookups hear that a cache's upstream list changed */
  bus: Pick<EventBus, 'subscribe'>;
  outbound?: OutboundClient;
  /** key rotation times and overlaps */
  clock: Clock;
  /** counts the binary cache's answers (kiln_cache_*) */
  metrics?: Pick<KilnMetrics, 'narinfoAnswered' | 'narBytesServed'>;
  /** the stored per-minute traffic series (services/metrics/trafficRecorder.ts) */
  trafficCounters?: Pick<TrafficCounters, 'narinfo' | 'served'>;
  /** log.traceDir: each upstream fetch is a span */
  tracer?: StageTracer;
}

/** Caches, their NARs and their upstreams, built once at start (services/createServices.ts). */
export function createCacheServices(deps: CacheServicesDeps) {
  // Upstream URLs are checked against outbound.allowedNetworks when saved and on every connection.
  const outbound = deps.outbound ?? createOutboundClient({ allowedNetworks: deps.config['outbound.allowedNetworks'] });
  const upstreams = createUpstreams({
    sql: deps.sql,
    log: deps.log,
    secretBox: deps.secretBox,
    concurrency: deps.config['cache.upstreamQueryConcurrency'],
    maxNarBytes: deps.config['nar.maxUploadSize'],
    tempFile: (suffix) => deps.nars.staging.tempFile(suffix),
    fetch: deps.tracer ? tracedFetch(outboundFetch(outbound), deps.tracer) : outboundFetch(outbound),
    bus: deps.bus,
  });
  return {
    caches: cachesService(deps),
    cacheNars: cacheNarsService(deps),
    cacheUpstreams: cacheUpstreamsService({ ...deps, outbound }),
    upstreams,
    /** POST /caches/{cache}/key/rotate and GET /caches/{cache}/keys */
    keyRotation: cacheKeyRotationService(deps),
    /** debuginfo/{build_id} from the debug build-ID index */
    debugInfo: (cacheId: string, buildId: string) => debugInfoDocument(deps.sql, cacheId, buildId),
    /** cache.narinfo.served and cache.nar.fetched, batched off the serving path */
    traffic: cacheTraffic(deps.events, deps.metrics, deps.trafficCounters),
  };
}
export type CacheServices = ReturnType<typeof createCacheServices>;
