// How often and when a failed delivery is attempted again (spec: Webhooks 3, Limits): 6 attempts
// in total, waiting 30 s, 1 min, 2 min, 4 min and 8 min after failed attempts 1 to 5, about
// 15.5 minutes from the first attempt to the last; after the 6th failure the delivery is dead.

export const DELIVERY_ATTEMPTS = 6;
export const RETRY_DELAYS_MS: readonly number[] = [30_000, 60_000, 120_000, 240_000, 480_000];

export interface DeliveryPolicy {
  /** waits after failed attempts 1, 2, …; the last one repeats for rows allowed more attempts */
  retryDelaysMs: readonly number[];
}

export const defaultDeliveryPolicy: DeliveryPolicy = { retryDelaysMs: RETRY_DELAYS_MS };

export function checkDeliveryPolicy(policy: DeliveryPolicy): DeliveryPolicy {
  const delays = policy.retryDelaysMs;
  if (delays.length === 0 || delays.some((d) => !Number.isFinite(d) || d < 0)) {
    throw new Error(`retryDelaysMs must be a non-empty list of waits in ms, each 0 or more; got ${JSON.stringify(delays)}`);
  }
  return policy;
}

/** The wait after failed attempt `attempt` (1-based). */
export function retryDelayMs(policy: DeliveryPolicy, attempt: number): number {
  const delays = policy.retryDelaysMs;
  return delays[Math.min(Math.max(attempt, 1), delays.length) - 1]!;
}
