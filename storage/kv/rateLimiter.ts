// The rate limiter seam: token buckets by key, kept in Redis or in this process (openRateLimiter.ts).
import type { RateDecision, TokenBucketPolicy } from './tokenBucket.js';

/** Token buckets by key (callers put the policy's name and the client address in the key). */
export interface RateLimiter {
  take(key: string, policy: TokenBucketPolicy): Promise<RateDecision>;
  close(): Promise<void>;
}
