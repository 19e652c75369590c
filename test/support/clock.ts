// A clock that moves only when a test steps it, for startTestKiln's `clock` option.
import type { Clock } from '../../services/index.js';

export interface SteppedClock extends Clock {
  /** moves the time forward by `ms` */
  step(ms: number): void;
}

export function steppedClock(start: Date): SteppedClock {
  let now = start.getTime();
  return {
    now: () => new Date(now),
    step: (ms) => {
      now += ms;
    },
  };
}
