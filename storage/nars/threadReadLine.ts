// A serving thread's line of NAR readers waiting for a place of nar.maxConcurrentDownloads
// (docs/binary-cache.md, "Storage reads"), on the count it shares with the main thread
// (sharedReadPlaces.ts). The same rules as the main thread's gate (storageReadGate.ts): places in
// arrival order, a reader whose client goes away leaves the line holding nothing, and one not served
// within nar.storageOpenTimeoutSecs is refused (503 storage_busy). A place the thread gives back
// passes straight to its next waiter; a place given back to the count anywhere (the main thread,
// another thread, a crashed thread's) wakes the line through Atomics.waitAsync on the count's FREED
// cell, with a timeout as a safety net.
import type { SharedReadPlaces } from './sharedReadPlaces.js';

/** held: the reader has a place (give it back with give()); gone: its client left; busy: none came in time. */
export type PlaceOutcome = 'held' | 'gone' | 'busy';

/** The line looks at the count again this often even without a wake-up (a lost notify costs this much, not a reader). */
const RECHECK_MS = 1000;

export interface ThreadReadLineOptions {
  places: SharedReadPlaces;
  /** nar.storageOpenTimeoutSecs */
  openTimeoutSecs: number;
  /** places this thread took from the count (+1) or gave back to it (-1): the main thread gives back a crashed thread's */
  held(change: 1 | -1): void;
  /** a place went back to the count while the main thread's line had readers waiting */
  mainWaits(): void;
  /** the line's length changed (the thread's summary shows it) */
  waitingNow?(count: number): void;
  /** the safety net's period (default RECHECK_MS); tests stretch it to see the wake-up alone */
  recheckMs?: number;
}

interface Waiter {
  grant(): void;
}

export class ThreadReadLine {
  private readonly line: Waiter[] = [];
  private watching = false;

  constructor(private readonly opts: ThreadReadLineOptions) {}

  /** Readers waiting in this thread's line. */
  get waiting(): number {
    return this.line.length;
  }

  /** A place, in arrival order; `gone` is the client's request aborting. */
  take(gone: AbortSignal): Promise<PlaceOutcome> {
    if (gone.aborted) return Promise.resolve('gone');
    if (this.line.length === 0 && this.opts.places.tryTake()) {
      this.opts.held(1);
      return Promise.resolve('held');
    }
    return new Promise((resolve) => {
      const leave = (outcome: PlaceOutcome) => {
        const at = this.line.indexOf(waiter);
        if (at < 0) return;
        this.line.splice(at, 1);
        this.opts.waitingNow?.(this.line.length);
        settle();
        resolve(outcome);
      };
      const onGone = () => leave('gone');
      const timer = setTimeout(() => leave('busy'), this.opts.openTimeoutSecs * 1000);
      const settle = () => {
        clearTimeout(timer);
        gone.removeEventListener('abort', onGone);
      };
      const waiter: Waiter = {
        grant: () => {
          settle();
          resolve('held');
        },
      };
      gone.addEventListener('abort', onGone, { once: true });
      this.line.push(waiter);
      this.opts.waitingNow?.(this.line.length);
      this.watch();
    });
  }

  /** Gives a place back: to this line's next reader, or to the count. */
  give(): void {
    const next = this.line.shift();
    if (next !== undefined) {
      this.opts.waitingNow?.(this.line.length);
      return next.grant();
    }
    this.opts.places.give();
    this.opts.held(-1);
    if (this.opts.places.waiting > 0) this.opts.mainWaits();
  }

  /** While readers wait: take what the count frees, wake on every give() to it anywhere. */
  private watch(): void {
    if (this.watching) return;
    this.watching = true;
    void this.watchLoop();
  }

  private async watchLoop(): Promise<void> {
    const { places } = this.opts;
    try {
      while (this.line.length > 0) {
        // Read before trying: a place given back after the try changes it, so the wait returns at once.
        const seen = places.freedSoFar;
        while (this.line.length > 0 && places.tryTake()) {
          this.opts.held(1);
          this.line.shift()!.grant();
        }
        if (this.line.length === 0) return;
        await places.freedSince(seen, this.opts.recheckMs ?? RECHECK_MS);
      }
    } finally {
      this.watching = false; // at once, in the same turn: a reader arriving next starts a new watch
    }
  }
}
