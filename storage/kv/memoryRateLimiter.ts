// Buckets in this process only: right for one server process, and what runs when no Redis is set.
import { checkPolicy, refillSpanMs, takeToken, type BucketState, type RateDecision, type TokenBucketPolicy } from './tokenBucket.js';
import type { RateLimiter } from './rateLimiter.js';

/** Above this many buckets, full ones are dropped (a full bucket is the same as no bucket). */
const SWEEP_ABOVE = 50_000;

interface Entry extends BucketState {
  /** when this bucket is full again if nobody takes from it */
  fullAt: number;
}

export function memoryRateLimiter(clock: { now(): number } = { now: Date.now }): RateLimiter {
  const buckets = new Map<string, Entry>();
  const sweep = (now: number) => {
    for (const [key, entry] of buckets) if (entry.fullAt <= now) buckets.delete(key);
  };
  return {
    async take(key: string, policy: TokenBucketPolicy): Promise<RateDecision> {
      checkPolicy(policy);
      const now = clock.now();
      if (buckets.size >= SWEEP_ABOVE) sweep(now);
      const { state, decision } = takeToken(buckets.get(key), policy, now);
      buckets.set(key, { ...state, fullAt: now + refillSpanMs(policy) });
      return decision;
    },
    async close() {
      buckets.clear();
    },
  };
}
