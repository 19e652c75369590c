// Per-client token buckets on the cache paths that unpack NARs (spec, Limits): ls and serve share
// one bucket (burst 180), log has its own (burst 900); both refill one request per 333 ms.
import type { RatePolicy } from '../rateLimit.js';

export const cacheRateLimits = {
  files: { name: 'cache.files', burst: 180, refillMs: 333 },
  log: { name: 'cache.log', burst: 900, refillMs: 333 },
} satisfies Record<string, RatePolicy>;
