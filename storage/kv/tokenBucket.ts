// The token bucket itself, as arithmetic: the in-memory limiter runs it in process and the Redis
// limiter runs the same steps in a Lua script, so both answer alike.

export interface TokenBucketPolicy {
  /** requests allowed at once: the bucket's size, and where a new bucket starts */
  burst: number;
  /** milliseconds for one token to come back */
  refillMs: number;
}

export interface RateDecision {
  allowed: boolean;
  /** whole tokens left after this request */
  remaining: number;
  /** when refused: milliseconds until a token is back (0 when allowed) */
  retryAfterMs: number;
}

export interface BucketState {
  /** fractional: refill accrues continuously */
  tokens: number;
  /** epoch milliseconds of the last take */
  at: number;
}

/** Refills the bucket for the time since its last take, then takes one token if there is one. */
export function takeToken(state: BucketState | undefined, policy: TokenBucketPolicy, now: number): { state: BucketState; decision: RateDecision } {
  const before = state ?? { tokens: policy.burst, at: now };
  const refilled = Math.min(policy.burst, before.tokens + Math.max(0, now - before.at) / policy.refillMs);
  if (refilled >= 1) {
    const tokens = refilled - 1;
    return { state: { tokens, at: now }, decision: { allowed: true, remaining: Math.floor(tokens), retryAfterMs: 0 } };
  }
  return {
    state: { tokens: refilled, at: now },
    decision: { allowed: false, remaining: 0, retryAfterMs: Math.ceil((1 - refilled) * policy.refillMs) },
  };
}

/** Milliseconds after which an untouched bucket is full again, so it can be forgotten. */
export const refillSpanMs = (policy: TokenBucketPolicy): number => Math.ceil(policy.burst * policy.refillMs);

export function checkPolicy(policy: TokenBucketPolicy): void {
  if (!Number.isInteger(policy.burst) || policy.burst < 1) throw new Error(`rate limit burst must be a positive integer, got ${policy.burst}`);
  if (!(policy.refillMs > 0)) throw new Error(`rate limit refillMs must be positive, got ${policy.refillMs}`);
}
