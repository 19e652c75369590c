// Per-client-address token buckets in front of handlers. docs/auth.md lists the numbers.
import { ApiError } from '../protocol/index.js';
import type { RateLimiter, TokenBucketPolicy } from '../storage/index.js';
import type { Req } from './request.js';
import type { Handler } from './router.js';

export interface RatePolicy extends TokenBucketPolicy {
  /** the bucket family; a client has one bucket per family */
  name: string;
}

/** The sign-in endpoints: slow enough to make password guessing useless, loose enough for people. */
export const authRateLimits = {
  login: { name: 'auth.login', burst: 20, refillMs: 3_000 },
  register: { name: 'auth.register', burst: 10, refillMs: 30_000 },
  checkUsername: { name: 'auth.check-username', burst: 60, refillMs: 500 },
  resendVerification: { name: 'auth.resend-verification', burst: 5, refillMs: 60_000 },
} satisfies Record<string, RatePolicy>;

/** Whose bucket a request takes from, and how the refusal names it. */
export type RateSubject<P> = (req: Req<P>) => { key: string; name: string };

const byAddress = <P>(req: Req<P>) => ({ key: req.peerAddress, name: req.peerAddress });

/**
 * Takes a token before the handler runs; without one the answer is 429 with Retry-After (seconds).
 * Buckets are per client address unless `subject` says otherwise.
 */
export function rateLimited<P>(limiter: RateLimiter, policy: RatePolicy, handler: Handler<P>, subject: RateSubject<P> = byAddress): Handler<P> {
  return async (req) => {
    const who = subject(req);
    const decision = await limiter.take(`${policy.name}:${who.key}`, policy);
    if (!decision.allowed) {
      const seconds = Math.max(1, Math.ceil(decision.retryAfterMs / 1000));
      throw new ApiError('rate_limited', `too many requests to ${req.path} from ${who.name}; retry in ${seconds} s`, {
        headers: { 'Retry-After': String(seconds) },
      });
    }
    return handler(req);
  };
}
