// Bounded waiting for tests. A test that waits for something it can observe polls for it with
// `eventually`, which fails with a message and the last value it saw instead of hanging until
// tap's 300 s timeout; `within` bounds a wait that an event ends. A test whose claim is that nothing
// happens for a while says so with `quietFor`.
import { setTimeout as sleep } from 'node:timers/promises';
import { inspect } from 'node:util';

export interface EventuallyOptions<T> {
  /** whether a value read is the one awaited; default: it is truthy */
  until?: (value: T) => boolean;
  /** how long to keep trying, in ms; default 20 s, far short of tap's 300 s per file */
  timeout?: number;
  /** the pause between two reads, in ms; default 25 */
  interval?: number;
  /** what is awaited, e.g. "the build completes"; it starts the failure's message */
  message?: string;
}

type Falsy = false | 0 | 0n | '' | null | undefined;

/** The failure of `eventually`, with the last value read. */
export class EventuallyTimeout extends Error {
  constructor(message: string, readonly lastValue: unknown) {
    super(message);
    this.name = 'EventuallyTimeout';
  }
}

/**
 * Calls `read` until `until` holds for its value (by default: until the value is truthy), and
 * resolves with that value. After `timeout` ms it rejects with an EventuallyTimeout naming `message`
 * and the last value read; a call still pending by then counts as not done, so a stuck read cannot
 * hang the test either. A throw from `read` rejects at once: a read that may fail while things
 * settle (a server still starting) catches that itself and returns a value that does not count.
 */
export function eventually<T>(read: () => T | Promise<T>, options: EventuallyOptions<T> & { until: (value: T) => boolean }): Promise<T>;
export function eventually<T>(read: () => T | Promise<T>, options?: EventuallyOptions<T>): Promise<Exclude<T, Falsy>>;
export async function eventually<T>(read: () => T | Promise<T>, options: EventuallyOptions<T> = {}): Promise<T> {
  const { until = Boolean, timeout = 20_000, interval = 25, message = 'the condition' } = options;
  const deadline = performance.now() + timeout;
  let last: { value: T } | undefined;
  const fail = (why: string): never => {
    const seen = last ? `the last value read was ${inspect(last.value, { depth: 4, breakLength: Infinity })}` : 'no read returned';
    throw new EventuallyTimeout(`${message}: ${why} after ${timeout} ms; ${seen}`, last?.value);
  };
  for (;;) {
    // Each read may run until the deadline, and the last one for at least one interval.
    const outcome = await settledWithin(read, Math.max(deadline - performance.now(), interval));
    if (!outcome) return fail('a read was still pending');
    if (until(outcome.value)) return outcome.value;
    last = outcome;
    const left = deadline - performance.now();
    if (left <= 0) return fail('not reached');
    await sleep(Math.min(interval, left));
  }
}

/**
 * `promise`, bounded: for a wait that an event ends (a frame, a log line) rather than a poll. It
 * rejects with an EventuallyTimeout after `timeout` ms; `message` is asked for only then, so it can
 * describe what had arrived by that time.
 */
export async function within<T>(promise: Promise<T>, timeout: number, message: () => string): Promise<T> {
  const outcome = await settledWithin(() => promise, timeout);
  if (!outcome) throw new EventuallyTimeout(`${message()}: not within ${timeout} ms`, undefined);
  return outcome.value;
}

/** `read`'s result, or undefined when it has not settled within `ms`. */

async function settledWithin<T>(read: () => T | Promise<T>, ms: number): Promise<{ value: T } | undefined> {
  const pending = Promise.resolve().then(read);
  const timer = new AbortController();
  try {
    return await Promise.race([
      pending.then((value) => ({ value })),
      sleep(ms, undefined, { signal: timer.signal }),
    ]);
  } finally {
    timer.abort();
    pending.catch(() => undefined); // a late rejection of an abandoned read is not an unhandled one
  }
}

/**
 * Waits `ms` on purpose, for a claim that nothing happens in that time (no frame, no retry, no
 * row). Time can only show such an absence as far as it lasts: keep the claim and the wait small,
 * and never use this to wait for something that does happen; that is what `eventually` is for.
 */
export function quietFor(ms: number): Promise<void> {
  return sleep(ms);
}
