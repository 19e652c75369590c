// Reconnect delays: 1 s, 2 s, 4 s, … capped at 60 s (spec, "Limits"), each with up to 20 %
// random jitter downwards so a restarted server is not hit by every worker in the same instant.

export const BACKOFF_BASE_MS = 1000;
export const BACKOFF_CAP_MS = 60_000;

/** The delay before reconnect attempt `attempt` (0 for the first after a loss). `random` is in [0, 1). */
export function backoffDelayMs(attempt: number, random: () => number = Math.random): number {
  const exponential = Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** Math.min(attempt, 16));
  return Math.round(exponential * (1 - 0.2 * random()));
}
