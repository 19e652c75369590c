// Retries for S3 requests under two limits from the configuration: s3.maxRetries, and
// s3.retryTimeoutSecs, after which no retry starts (the SDK's own strategy knows only the first).
// The same policy also drives puts from files, which the SDK never retries because the body is a stream.
import type { S3ClientConfig } from '@aws-sdk/client-s3';
import { setTimeout as sleep } from 'node:timers/promises';

// The SDK's retry interface, named through the client's config so no further package is imported.
type RetryStrategyV2 = Extract<NonNullable<S3ClientConfig['retryStrategy']>, { acquireInitialRetryToken: unknown }>;
type RetryErrorInfo = Parameters<RetryStrategyV2['refreshRetryTokenForRetry']>[1];
type RetryErrorType = RetryErrorInfo['errorType'];

// The SDK's own defaults (standard mode): 100 ms base, 500 ms when throttled, at most 20 s between attempts.
const BASE_DELAY_MS = 100;
const THROTTLED_BASE_DELAY_MS = 500;
const MAX_DELAY_MS = 20_000;

class RetryAttempt {
  constructor(
    readonly firstAttemptAt: number,
    private readonly retries: number,
    private readonly delayMs: number,
  ) {}

  getRetryCount(): number {
    return this.retries;
  }

  getRetryDelay(): number {
    return this.delayMs;
  }
}

export interface S3RetryLimits {
  /** attempts in all, first one included: s3.maxRetries + 1 */
  maxAttempts: number;
  /** s3.retryTimeoutSecs in milliseconds; 0 means no retry at all */
  retryWindowMs: number;
  /** the clock the window is measured on; tests step it */
  now?: () => number;
}

export class S3RetryPolicy implements RetryStrategyV2 {
  readonly mode = 'standard';

  private readonly now: () => number;

  constructor(private readonly limits: S3RetryLimits) {
    this.now = limits.now ?? Date.now;
  }

  async acquireInitialRetryToken(): Promise<RetryAttempt> {
    return new RetryAttempt(this.now(), 0, 0);
  }

  /** The next attempt's token, or a throw, which makes the SDK give up with the request's own error. */
  async refreshRetryTokenForRetry(token: unknown, info: RetryErrorInfo): Promise<RetryAttempt> {
    if (!(token instanceof RetryAttempt)) throw new Error('S3RetryPolicy was handed a retry token it did not issue');
    if (info.errorType !== 'TRANSIENT' && info.errorType !== 'THROTTLING') throw new Error('not retryable');
    const retries = token.getRetryCount() + 1;
    if (retries >= this.limits.maxAttempts) throw new Error('s3.maxRetries reached');
    const delay = backoff(token.getRetryCount(), info);
    // `>=`: a retry due at the window's very end would start after it; and jitter can make the
    // delay 0 within the same millisecond, which `>` let through for a window of 0.
    if (this.now() + delay - token.firstAttemptAt >= this.limits.retryWindowMs) throw new Error('s3.retryTimeoutSecs passed');
    return new RetryAttempt(token.firstAttemptAt, retries, delay);
  }

  recordSuccess(): void {}

  /** Runs `attempt` until it succeeds or the policy gives up, then throws the last attempt's error. */
  async run<T>(attempt: () => Promise<T>): Promise<T> {
    let token = await this.acquireInitialRetryToken();
    for (;;) {
      try {
        return await attempt();
      } catch (error) {
        try {
          token = await this.refreshRetryTokenForRetry(token, { errorType: retryErrorType(error) });
        } catch {
          throw error;
        }
        await sleep(token.getRetryDelay());
      }
    }
  }
}

/** Exponential backoff with full jitter, stretched to a server's Retry-After within the usual cap. */
function backoff(retries: number, info: RetryErrorInfo): number {
  const base = info.errorType === 'THROTTLING' ? THROTTLED_BASE_DELAY_MS : BASE_DELAY_MS;
  const delay = Math.floor(Math.random() * Math.min(MAX_DELAY_MS, base * 2 ** retries));
  const hinted = info.retryAfterHint instanceof Date ? info.retryAfterHint.getTime() - Date.now() : 0;
  return Math.max(delay, Math.min(hinted, MAX_DELAY_MS));
}

const THROTTLING_NAMES = new Set(['SlowDown', 'Throttling', 'ThrottlingException', 'RequestLimitExceeded', 'TooManyRequestsException', 'RequestThrottled']);
const TRANSIENT_NAMES = new Set(['TimeoutError', 'RequestTimeout', 'RequestTimeoutException', 'InternalError', 'ServiceUnavailable']);
const TRANSIENT_STATUSES = new Set([500, 502, 503, 504]);
const NETWORK_CODES = new Set(['ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);

/** How the SDK would classify an error; used for the requests this policy retries itself. */
export function retryErrorType(error: unknown): RetryErrorType {
  if (typeof error !== 'object' || error === null) return 'CLIENT_ERROR';
  const { name, code, $metadata } = error as { name?: unknown; code?: unknown; $metadata?: { httpStatusCode?: number } };
  const status = $metadata?.httpStatusCode;
  if (status === 429 || (typeof name === 'string' && THROTTLING_NAMES.has(name))) return 'THROTTLING';
  if (
    (status !== undefined && TRANSIENT_STATUSES.has(status)) ||
    (typeof name === 'string' && TRANSIENT_NAMES.has(name)) ||
    (typeof code === 'string' && NETWORK_CODES.has(code))
  ) {
    return 'TRANSIENT';
  }
  return 'CLIENT_ERROR';
}
