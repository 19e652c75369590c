// Buckets in Redis, shared by every server process of an installation. The arithmetic is the one
// of tokenBucket.ts, run inside Redis so that read, refill and take are one atomic step, and timed
// by Redis's clock so that processes with drifting clocks agree.
import type { Logger } from 'pino';
import { checkPolicy, refillSpanMs, type RateDecision, type TokenBucketPolicy } from './tokenBucket.js';
import type { RateLimiter } from './rateLimiter.js';

const TAKE_SCRIPT = `
local burst = tonumber(ARGV[1])
local refill = tonumber(ARGV[2])
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local saved = redis.call('HMGET', KEYS[1], 't', 'a')
local tokens = tonumber(saved[1])
local at = tonumber(saved[2])
if tokens == nil or at == nil then tokens = burst; at = now end
tokens = math.min(burst, tokens + math.max(0, now - at) / refill)
local allowed = 0
local retry = 0
if tokens >= 1 then tokens = tokens - 1; allowed = 1 else retry = math.ceil((1 - tokens) * refill) end
redis.call('HSET', KEYS[1], 't', tostring(tokens), 'a', tostring(now))
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]))
return {allowed, retry, math.floor(tokens)}
`;

const KEY_PREFIX = 'kiln:ratelimit:';

type TakeReply = [number, number, number];

export interface RedisRateLimiterOptions {
  log: Logger;
  /** prepended to every key after kiln's own prefix; tests use it to stay apart */
  namespace?: string;
}

/**
 * Connects (and fails with a message naming the URL's host if Redis does not answer). When Redis
 * goes away later, requests are let through and a warning is logged: a rate limiter must not turn
 * a Redis outage into a sign-in outage.
 */
export async function redisRateLimiter(url: string, opts: RedisRateLimiterOptions): Promise<RateLimiter> {
  // loaded only with redis.url set (docs/operations.md, "Memory at rest")
  const { Redis } = await import('ioredis');
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1, enableOfflineQueue: false });
  redis.on('error', () => undefined); // reported where a command fails; ioredis reconnects by itself
  try {
    await redis.connect();
  } catch (cause) {
    redis.disconnect();
    const where = new URL(url);
    throw new Error(`cannot connect to Redis at ${where.hostname}:${where.port || '6379'} (redis.url) for rate limits: ${(cause as Error).message}`, { cause });
  }
  const sha = (await redis.script('LOAD', TAKE_SCRIPT)) as string;
  const prefix = KEY_PREFIX + (opts.namespace ?? '');
  let warned = false;
  return {
    async take(key: string, policy: TokenBucketPolicy): Promise<RateDecision> {
      checkPolicy(policy);
      const args = [String(policy.burst), String(policy.refillMs), String(refillSpanMs(policy) + 1000)];
      try {
        let reply: TakeReply;
        try {
          reply = (await redis.evalsha(sha, 1, prefix + key, ...args)) as TakeReply;
        } catch (e) {
          // After a Redis restart the script cache is empty.
          if (!(e instanceof Error && e.message.startsWith('NOSCRIPT'))) throw e;
          reply = (await redis.eval(TAKE_SCRIPT, 1, prefix + key, ...args)) as TakeReply;
        }
        warned = false;
        return { allowed: reply[0] === 1, retryAfterMs: reply[1], remaining: reply[2] };
      } catch (e) {
        if (!warned) opts.log.warn({ err: e }, 'Redis did not answer a rate-limit check; letting requests through until it does');
        warned = true;
        return { allowed: true, retryAfterMs: 0, remaining: 0 };
      }
    },
    async close() {
      await redis.quit().catch(() => redis.disconnect());
    },
  };
}
