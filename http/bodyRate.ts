// The minimum rate of a streamed request body (upload.minBytesPerSec): a client that holds an
// upload permit while sending a trickle is cut, so eight slow uploads cannot keep the permits
// from every other tenant. The policy is the pure `judgeRateWindow`; `BodyRateGuard` applies it
// with an injected clock, so tests move time instead of sleeping through the window.
import { ApiError } from '../protocol/index.js';

/** The window the rate is averaged over: time the server spent waiting for the client's bytes. */
export const RATE_WINDOW_MS = 30_000;

export interface MinimumBodyRate {
  /** upload.minBytesPerSec; 0 turns the check off */
  bytesPerSec: number;
  windowMs: number;
}

/** Where the guard reads time and sets its one timer (tests pass a clock they move by hand). */
export interface TimerClock {
  now(): number;
  setTimer(ms: number, fire: () => void): { cancel(): void };
}

export const systemTimerClock: TimerClock = {
  now: () => performance.now(),
  setTimer(ms, fire) {
    const timer = setTimeout(fire, ms);
    return { cancel: () => clearTimeout(timer) };
  },
};

/**
 * One window of a body: the time the reader spent waiting on the client (a reader busy with the
 * disk, or a permit not yet granted, is the server's delay, not the client's) and the bytes that
 * came meanwhile.
 */
export interface RateWindow {
  waitedMs: number;
  bytes: number;
}

/** open: the window is not over; met: start a new one; slow: fewer than the minimum came. */
export function judgeRateWindow(window: RateWindow, limits: MinimumBodyRate): 'open' | 'met' | 'slow' {
  if (limits.bytesPerSec <= 0 || window.waitedMs < limits.windowMs) return 'open';
  return window.bytes * 1000 >= limits.bytesPerSec * limits.windowMs ? 'met' : 'slow';
}

export const tooSlow = (limits: MinimumBodyRate): ApiError =>
  new ApiError(
    'upload_too_slow',
    `the request body came at less than ${limits.bytesPerSec} bytes/s over ${limits.windowMs / 1000} s (upload.minBytesPerSec); the upload was cut so it stops holding an upload permit, send it again on a faster link`,
  );

/** Watches one body: BodyStream calls `waiting()` when its reader waits for bytes and `fed()` when it may go on. */
export class BodyRateGuard {
  private window: RateWindow = { waitedMs: 0, bytes: 0 };
  private waitingSince: number | null = null;
  private timer: { cancel(): void } | null = null;

  constructor(
    private readonly limits: MinimumBodyRate,
    private readonly clock: TimerClock,
    /** called once when the body falls below the rate */
    private readonly cut: (error: ApiError) => void,
  ) {}

  received(bytes: number): void {
    this.window.bytes += bytes;
  }

  waiting(): void {
    if (this.limits.bytesPerSec <= 0 || this.waitingSince !== null) return;
    this.waitingSince = this.clock.now();
    this.arm();
  }

  fed(): void {
    if (this.waitingSince === null) return;
    this.settle();
    this.waitingSince = null;
    this.timer?.cancel();
    this.timer = null;
  }

  /** The body ended or failed: no timer may outlive it. */
  stop(): void {
    this.waitingSince = null;
    this.timer?.cancel();
    this.timer = null;
  }

  private arm(): void {
    this.timer = this.clock.setTimer(Math.max(1, this.limits.windowMs - this.window.waitedMs), () => {
      this.timer = null;
      if (this.waitingSince === null) return;
      if (this.settle()) this.arm();
    });
  }

  /** Counts the wait so far and judges the window; false when the body was cut. */
  private settle(): boolean {
    const now = this.clock.now();
    this.window.waitedMs += now - (this.waitingSince ?? now);
    if (this.waitingSince !== null) this.waitingSince = now;
    const verdict = judgeRateWindow(this.window, this.limits);
    if (verdict === 'met') this.window = { waitedMs: 0, bytes: 0 };
    if (verdict !== 'slow') return true;
    this.stop();
    this.cut(tooSlow(this.limits));
    return false;
  }
}
