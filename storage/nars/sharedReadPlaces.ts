// The count of NAR reads from storage running at once (nar.maxConcurrentDownloads), kept in shared
// memory so that the serving threads' reads (http/serving/threadNars.ts) and the main thread's are
// one count (docs/binary-cache.md, "Storage reads"). A thread that finds no free place does not
// wait: it hands the request to the main thread, whose gate queues it in order and answers 503
// storage_busy in time. A thread that gives a place back while the main thread has readers waiting
// tells it (wake), so the place passes on at once.
/** Int32 slots of the shared buffer. */
const ACTIVE = 0;
const WAITING = 1;
const SLOTS = 2;

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

  /** Gives `count` places back. */
  give(count = 1): void {
    Atomics.sub(this.cells, ACTIVE, count);
  }

  get active(): number {
    return Atomics.load(this.cells, ACTIVE);
  }

  /** Readers waiting in the main thread's line (set by the main thread only). */
  get waiting(): number {
    return Atomics.load(this.cells, WAITING);
  }

  set waiting(count: number) {
    Atomics.store(this.cells, WAITING, count);
  }
}
