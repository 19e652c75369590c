/** Where services read the time, so tests can move it (invitation expiry, key expiry). */
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };
