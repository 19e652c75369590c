// worker.log.burstBytesPerMin and worker.log.sustainedBytesPerHour: two token buckets per build.
// A line goes through only when both buckets hold its size; otherwise it is dropped and counted,
// and the build goes on. A cap of 0 means no cap. The clock is injected so tests need no waiting.

export interface LogCaps {
  burstBytesPerMin: number;
  sustainedBytesPerHour: number;
}

class Bucket {
  private tokens: number;
  private last: number;
  constructor(private readonly capacity: number, private readonly periodMs: number, now: number) {
    this.tokens = capacity;
    this.last = now;
  }
  refill(now: number): void {
    this.tokens = Math.min(this.capacity, this.tokens + ((now - this.last) * this.capacity) / this.periodMs);
    this.last = now;
  }
  has(bytes: number): boolean {
    return this.tokens >= bytes;
  }
  take(bytes: number): void {
    this.tokens -= bytes;
  }
}

export class LogLimiter {
  private readonly buckets: Bucket[];
  forwardedBytes = 0;
  droppedBytes = 0;

  constructor(caps: LogCaps, private readonly now: () => number = Date.now) {
    const start = now();
    this.buckets = [
      ...(caps.burstBytesPerMin > 0 ? [new Bucket(caps.burstBytesPerMin, 60_000, start)] : []),
      ...(caps.sustainedBytesPerHour > 0 ? [new Bucket(caps.sustainedBytesPerHour, 3_600_000, start)] : []),
    ];
  }

  /** Whether `bytes` more may be forwarded now; counts them either way. */
  admit(bytes: number): boolean {
    const now = this.now();
    for (const bucket of this.buckets) bucket.refill(now);
    if (!this.buckets.every((bucket) => bucket.has(bytes))) {
      this.droppedBytes += bytes;
      return false;
    }
    for (const bucket of this.buckets) bucket.take(bytes);
    this.forwardedBytes += bytes;
    return true;
  }
}
