// Bounds NAR reads from storage (docs/binary-cache.md, "Storage reads"): at most
// nar.maxConcurrentDownloads reads run at once across all connections, at most
// nar.maxConcurrentServes of them for one worker, and a read that cannot start within
// nar.storageOpenTimeoutSecs (waiting for a place, then for the store to hand over the stream)
// fails with StorageBusy, so the client is told to retry instead of hanging on a stalled store.
import type { BlobRead } from '../blobs/index.js';
import { DEFAULT_READ_PACE, watchReadPace, type PaceClock, type ReaderTooSlow, type ReadPaceLimits } from './readPace.js';
import { SharedReadPlaces } from './sharedReadPlaces.js';

export class StorageBusy extends Error {
  constructor(readonly waitedSecs: number) {
    super(`no NAR stream from storage within ${waitedSecs} s`);
    this.name = 'StorageBusy';
  }
}

export const isStorageBusy = (e: unknown): e is StorageBusy => e instanceof StorageBusy;

/** The reader went away (its request aborted) before its read started: it left the line, holding nothing. */
export class ReaderGone extends Error {
  constructor() {
    super('the client went away before its NAR read from storage started');
    this.name = 'ReaderGone';
  }
}

export interface StorageReadGateOptions {
  /** nar.maxConcurrentDownloads */
  maxReads: number;
  /** nar.maxConcurrentServes, per worker */
  maxReadsPerWorker: number;
  /** nar.storageOpenTimeoutSecs */
  openTimeoutSecs: number;
  /** the minimum pace of a held read (readPace.ts); DEFAULT_READ_PACE unless a test asks otherwise */
  pace?: ReadPaceLimits;
  paceClock?: PaceClock;
}

/** Places handed out in arrival order; a waiter whose deadline passes leaves the line. */
class Places {
  private readonly line: { grant: () => void }[] = [];

  /** `count`: the places taken, this process's own or shared with the serving threads. */
  constructor(private readonly count: PlaceCount) {}

  get idle(): boolean {
    return this.count.active === 0 && this.line.length === 0;
  }

  /** Resolves true once a place is held, false when `signal` fires first. */
  take(signal: AbortSignal): Promise<boolean> {
    if (this.line.length === 0 && this.count.tryTake()) return Promise.resolve(true);
    return new Promise((resolve) => {
      const waiter = { grant: () => { signal.removeEventListener('abort', leave); resolve(true); } };
      const leave = () => {
        const at = this.line.indexOf(waiter);
        if (at >= 0) this.line.splice(at, 1);
        this.count.waiting = this.line.length;
        resolve(false);
      };
      if (signal.aborted) return resolve(false);
      signal.addEventListener('abort', leave, { once: true });
      this.line.push(waiter);
      this.count.waiting = this.line.length;
    });
  }

  give(): void {
    const next = this.line.shift();
    this.count.waiting = this.line.length;
    // The place passes straight to the next waiter, so the count stays as it is.
    if (next) next.grant();
    else this.count.give();
  }

  /** Places given back elsewhere (a serving thread): the line takes what is free now. */
  wake(): void {
    while (this.line.length > 0 && this.count.tryTake()) {
      const next = this.line.shift()!;
      this.count.waiting = this.line.length;
      next.grant();
    }
  }
}

/** How many places are taken: SharedReadPlaces, or LocalPlaces for one worker's. */
interface PlaceCount {
  readonly active: number;
  waiting: number;
  tryTake(): boolean;
  give(): void;
}

class LocalPlaces implements PlaceCount {
  active = 0;
  waiting = 0;
  constructor(private readonly limit: number) {}
  tryTake(): boolean {
    if (this.active >= this.limit) return false;
    this.active++;
    return true;
  }
  give(): void {
    this.active--;
  }
}

export class StorageReadGate {
  /** The nar.maxConcurrentDownloads count, shared with the serving threads (http/serving/threadNars.ts). */
  readonly shared: SharedReadPlaces;
  private readonly all: Places;
  private readonly perWorker = new Map<string, Places>();

  constructor(private readonly options: StorageReadGateOptions) {
    this.shared = new SharedReadPlaces(options.maxReads);
    this.all = new Places(this.shared);
  }

  /** A serving thread gave places back (or ended holding `lost` of them): readers waiting here take them. */
  placesFreed(lost = 0): void {
    if (lost > 0) this.shared.give(lost);
    this.all.wake();
  }

  /**
   * Runs `open` once a place is free; the place is held until the returned read's body ends or is
   * cancelled. `worker` names the worker asking (its address), when the request is a build job's.
   * `gone` fires when the reader's request is aborted: a reader that left must not keep its place in
   * line until the deadline, nor take a place and open the blob for nobody (a client could otherwise
   * queue thousands of such reads by connecting and hanging up, ahead of every real one).
   */
  async open(open: () => Promise<BlobRead | null>, worker?: string, gone?: AbortSignal): Promise<BlobRead | null> {
    if (gone?.aborted) throw new ReaderGone();
    const deadline = new AbortController();
    const timer = setTimeout(() => deadline.abort(), this.options.openTimeoutSecs * 1000);
    const signal = gone ? AbortSignal.any([deadline.signal, gone]) : deadline.signal;
    try {
      return await this.openBefore(open, worker, signal, gone);
    } finally {
      clearTimeout(timer);
    }
  }

  private async openBefore(open: () => Promise<BlobRead | null>, worker: string | undefined, deadline: AbortSignal, gone: AbortSignal | undefined): Promise<BlobRead | null> {
    const refusal = () => (gone?.aborted ? new ReaderGone() : new StorageBusy(this.options.openTimeoutSecs));
    const own = worker === undefined ? undefined : this.placesOf(worker);
    if (own && !(await own.take(deadline))) {
      this.forgetIfIdle(worker);
      throw refusal();
    }
    if (!(await this.all.take(deadline))) {
      this.release(own, worker);
      throw refusal();
    }
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      this.all.give();
      this.release(own, worker);
    };
    let read: BlobRead | null;
    try {
      read = await untilAborted(open(), deadline, refusal);
    } catch (e) {
      release();
      throw e;
    }
    if (read === null) {
      release();
      return null;
    }
    return holding(read, release, this.options.pace ?? DEFAULT_READ_PACE, this.options.paceClock);
  }

  private placesOf(worker: string): Places {
    let places = this.perWorker.get(worker);
    if (!places) this.perWorker.set(worker, (places = new Places(new LocalPlaces(this.options.maxReadsPerWorker))));
    return places;
  }

  private release(own: Places | undefined, worker: string | undefined): void {
    if (!own || worker === undefined) return;
    own.give();
    this.forgetIfIdle(worker);
  }

  /** Forgets the worker's places once nobody holds or waits for one. */
  private forgetIfIdle(worker: string | undefined): void {
    if (worker !== undefined && this.perWorker.get(worker)?.idle) this.perWorker.delete(worker);
  }
}

/** The opened read, or `refusal()` when the signal comes first (a late read is cancelled on arrival). */
function untilAborted(opening: Promise<BlobRead | null>, signal: AbortSignal, refusal: () => Error): Promise<BlobRead | null> {
  return new Promise((resolve, reject) => {
    let late = false;
    const onAbort = () => {
      late = true;
      reject(refusal());
    };
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    opening.then(
      (read) => {
        signal.removeEventListener('abort', onAbort);
        if (late) read?.cancel();
        else resolve(read);
      },
      (e: unknown) => {
        signal.removeEventListener('abort', onAbort);
        if (!late) reject(e instanceof Error ? e : new Error(String(e)));
      },
    );
  });
}

/**
 * The read, giving its place back once when the body ends, fails or is cancelled, or when its pace
 * since it opened falls below the minimum at a check (readPace.ts): the store's stream is cancelled
 * and the body ends with ReaderTooSlow when next pulled. The pace counts bytes pulled from the
 * store, which the HTTP side pulls only as the client takes them.
 */
function holding(read: BlobRead, release: () => void, pace: ReadPaceLimits, clock: PaceClock | undefined): BlobRead {
  let tooSlow: ReaderTooSlow | null = null;
  const watch = watchReadPace(pace, (e) => {
    tooSlow = e;
    release();
    read.cancel();
  }, clock);
  const done = () => {
    watch.stop();
    release();
  };
  return {
    size: read.size,
    range: read.range,
    cancel() {
      read.cancel();
      done();
    },
    body: {
      async *[Symbol.asyncIterator]() {
        try {
          for await (const chunk of read.body) {
            if (tooSlow) throw tooSlow;
            watch.add(chunk.byteLength);
            yield chunk;
          }
          if (tooSlow) throw tooSlow;
        } finally {
          done();
        }
      },
    },
  };
}
