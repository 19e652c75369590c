// The public face of storage/kv/: what other folders import from it (DESIGN.md, Layout).
export { type RateLimiter } from './rateLimiter.js';
export { openRateLimiter } from './openRateLimiter.js';
export { memoryRateLimiter } from './memoryRateLimiter.js';
export { redisRateLimiter, type RedisRateLimiterOptions } from './redisRateLimiter.js';
export { takeToken, type BucketState, type RateDecision, type TokenBucketPolicy } from './tokenBucket.js';
export { TtlMap } from './ttlMap.js';
