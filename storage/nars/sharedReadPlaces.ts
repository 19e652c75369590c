// The count of NAR reads from storage running at once (nar.maxConcurrentDownloads), kept in shared
// memory so that the serving threads' reads (http/serving/threadNars.ts) and the main thread's are
// one count (docs/binary-cache.md, "Storage reads"). Each side keeps its own line of readers waiting
// for a place: the main thread's gate (storageReadGate.ts) and each thread's (threadReadLine.ts).
// A place given back to the count bumps FREED and wakes the threads' lines (Atomics.notify; they
// wait with Atomics.waitAsync); a thread that gives a place back while the main thread has readers
// waiting tells it (a message), so the place passes on at once either way.
/** Int32 slots of the shared buffer. */
const ACTIVE = 0;
const WAITING = 1;
/** bumped by every place given back to the count: the threads' lines wait on it */
const FREED = 2;
const SLOTS = 3;

/** Atomics.waitAsync (ES2024; kiln's lib is ES2023): its result, with `async` true when it waits. */
type WaitAsyncResult = { async: false; value: 'not-equal' | 'timed-out' } | { async: true; value: Promise<'ok' | 'timed-out'> };
const waitAsync = (Atomics as unknown as { waitAsync(cells: Int32Array, index: number, value: number, timeoutMs: number): WaitAsyncResult }).waitAsync;

export class SharedReadPlaces {
  readonly buffer: SharedArrayBuffer;
  private readonly cells: Int32Array;

  /** `buffer` null: a new count; a thread passes the buffer the main thread gave it. */
  constructor(readonly limit: number, buffer: SharedArrayBuffer | null = null) {
    this.buffer = buffer ?? new SharedArrayBuffer(SLOTS * Int32Array.BYTES_PER_ELEMENT);
    this.cells = new Int32Array(this.buffer);
  }

  /** Takes a place if one is free; never waits. */
  tryTake(): boolean {
    for (;;) {
      const active = Atomics.load(this.cells, ACTIVE);
      if (active >= this.limit) return false;
      if (Atomics.compareExchange(this.cells, ACTIVE, active, active + 1) === active) return true;
    }
  }

  /** Gives `count` places back, and wakes the lines that wait for one. */
  give(count = 1): void {
    Atomics.sub(this.cells, ACTIVE, count);
    Atomics.add(this.cells, FREED, 1);
    Atomics.notify(this.cells, FREED);
  }

  get active(): number {
    return Atomics.load(this.cells, ACTIVE);
  }

  /** How many times places were given back so far: read it before trying to take one, then wait on it. */
  get freedSoFar(): number {
    return Atomics.load(this.cells, FREED);
  }

  /**
   * Resolves once places were given back after `seen` (freedSoFar) was read, at once if they
   * already were, or after `timeoutMs` (a safety net: the waiter looks again either way).
   */
  async freedSince(seen: number, timeoutMs: number): Promise<void> {
    const wait = waitAsync(this.cells, FREED, seen, timeoutMs);
    if (wait.async) await wait.value;
  }

  /** Readers waiting in the main thread's line (set by the main thread only). */
  get waiting(): number {
    return Atomics.load(this.cells, WAITING);
  }

  set waiting(count: number) {
    Atomics.store(this.cells, WAITING, count);
  }
}
