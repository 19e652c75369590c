import type { Logger } from 'pino';
import type { Config } from '../../config/index.js';
import { memoryRateLimiter } from './memoryRateLimiter.js';
import { redisRateLimiter } from './redisRateLimiter.js';
import type { RateDecision, TokenBucketPolicy } from './tokenBucket.js';

/** Token buckets by key (callers put the policy's name and the client address in the key). */
export interface RateLimiter {
  take(key: string, policy: TokenBucketPolicy): Promise<RateDecision>;
  close(): Promise<void>;
}

/**
 * In Redis when redis.url is set (shared by every server process, timed by Redis's clock), in this
 * process otherwise, timed by `clock` (tests inject one to step through refills).
 */
export async function openRateLimiter(config: Pick<Config, 'redis.url'>, log: Logger, clock?: { now(): number }): Promise<RateLimiter> {
  const url = config['redis.url'];
  return url ? redisRateLimiter(url, { log }) : memoryRateLimiter(clock);
}
