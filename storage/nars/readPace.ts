// The minimum pace of a held storage read (docs/binary-cache.md, "Storage reads"): a reader that
// trickles (a few bytes a second over many connections) would hold every place of
// nar.maxConcurrentDownloads for hours, since uWS's idle timeout only cuts one that stops outright.
// One rule for the main thread's reads (storageReadGate.ts) and the serving threads' (threadNars.ts).

/**
 * 16 KiB/s is a 128 kbit/s link; holding all 16 default places at that pace costs an attacker
 * 256 KiB/s, not nothing, and a server facing the public should size nar.maxConcurrentDownloads
 * well above that.
 */
export const MIN_READ_BYTES_PER_SEC = 16 * 1024;
export const READ_PACE_CHECK_MS = 30_000;

export interface ReadPaceLimits {
  /** a held read whose average pace since it opened falls below this many bytes a second loses its place */
  minBytesPerSec: number;
  /** how often that pace is checked */
  checkMs: number;
}

export const DEFAULT_READ_PACE: ReadPaceLimits = { minBytesPerSec: MIN_READ_BYTES_PER_SEC, checkMs: READ_PACE_CHECK_MS };

/** Where the watch reads time and sets its repeating timer (tests pass a clock they move by hand). */
export interface PaceClock {
  now(): number;
  every(ms: number, tick: () => void): { cancel(): void };
}

export const systemPaceClock: PaceClock = {
  now: () => performance.now(),
  every(ms, tick) {
    const timer = setInterval(tick, ms);
    timer.unref();
    return { cancel: () => clearInterval(timer) };
  },
};

export class ReaderTooSlow extends Error {
  constructor(readonly bytesPerSec: number, minimum: number) {
    super(`the NAR was read at ${Math.round(bytesPerSec)} bytes/s, below ${minimum}`);
    this.name = 'ReaderTooSlow';
  }
}

export interface PaceWatch {
  /** bytes the reader took */
  add(bytes: number): void;
  /** the read ended: no more checks */
  stop(): void;
}

/** Checks a read's average pace since now every `checkMs`; below the minimum, `tooSlow` is called once and the watch stops. */
export function watchReadPace(limits: ReadPaceLimits, tooSlow: (e: ReaderTooSlow) => void, clock: PaceClock = systemPaceClock): PaceWatch {
  const opened = clock.now();
  let taken = 0;
  const timer = clock.every(limits.checkMs, () => {
    const bytesPerSec = taken / ((clock.now() - opened) / 1000);
    if (bytesPerSec >= limits.minBytesPerSec) return;
    timer.cancel();
    tooSlow(new ReaderTooSlow(bytesPerSec, limits.minBytesPerSec));
  });
  return {
    add(bytes) {
      taken += bytes;
    },
    stop: () => timer.cancel(),
  };
}
