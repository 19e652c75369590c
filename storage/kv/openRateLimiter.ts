// Chooses where token buckets live: Redis when redis.url is set, this process otherwise.
import type { Logger } from 'pino';
import type { Config } from '../../config/index.js';
import { memoryRateLimiter } from './memoryRateLimiter.js';
import type { RateLimiter } from './rateLimiter.js';
import { redisRateLimiter } from './redisRateLimiter.js';

/**
 * In Redis when redis.url is set (shared by every server process, timed by Redis's clock), in this
 * process otherwise, timed by `clock` (tests inject one to step through refills).
 */
export async function openRateLimiter(config: Pick<Config, 'redis.url'>, log: Logger, clock?: { now(): number }): Promise<RateLimiter> {
  const url = config['redis.url'];
  return url ? redisRateLimiter(url, { log }) : memoryRateLimiter(clock);
}
