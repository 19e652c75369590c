// uWS hands body chunks to onData, which must be attached before the handler's first await,
// and neuters each ArrayBuffer after the callback: every chunk is copied. uWS does not drain
// the microtask queue after its callbacks, so a promise settled inside one is settled through
// setImmediate; otherwise its continuation waits for some unrelated macrotask.
import type { HttpResponse } from 'uWebSockets.js';
import { ApiError } from '../protocol/index.js';
import { mebibyteBuffers } from '../storage/index.js';
import { BodyRateGuard, type MinimumBodyRate, type TimerClock } from './bodyRate.js';

/** Whether the client has sent its whole body (uWS gave the last chunk), read or not. */
export class BodyEnd {
  ended = false;
}

/**
 * Collects a whole body up to `limit` bytes; beyond it the promise fails with 413. `end` learns when
 * the last chunk came, even after the failure (the refusal then knows whether bytes are still coming).
 */
export function bufferBody(res: HttpResponse, limit: number, declaredLength: number | null, end = new BodyEnd()): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const settle = (fn: () => void) => setImmediate(fn);
    const chunks: Buffer[] = [];
    let size = 0;
    let failed = declaredLength !== null && declaredLength > limit;
    if (failed) reject(tooLarge(limit));
    res.onData((chunk, isLast) => {
      if (isLast) end.ended = true;
      if (failed) return;
      size += chunk.byteLength;
      if (size > limit) {
        failed = true;
        settle(() => reject(tooLarge(limit)));
        return;
      }
      chunks.push(Buffer.from(chunk.slice(0)));
      if (isLast) settle(() => resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size)));
    });
  });
}

const tooLarge = (limit: number) =>
  new ApiError('body_too_large', `request body exceeds the limit of ${limit} bytes (http.maxRequestSize)`);

const SLAB_BYTES = mebibyteBuffers.bufferBytes;

/**
 * A body as an async iterable with backpressure: uWS is paused while more than `highWater`
 * bytes wait for the consumer. `limit` bounds the total (413 beyond it).
 */
export class BodyStream implements AsyncIterable<Uint8Array> {
  private readonly queue: Buffer[] = [];
  private queued = 0;
  private done = false;
  private failure: Error | null = null;
  private wake: (() => void) | null = null;
  private paused = false;
  private received = 0;
  private lastChunkCame = false;

  /** The slab being filled (reusesPieces), and the one the consumer holds. */
  private slab: Buffer | null = null;
  private filled = 0;
  private lent: Buffer | null = null;
  private readonly rate: BodyRateGuard | null;

  constructor(
    private readonly res: HttpResponse,
    private readonly limit: number,
    /**
     * Pieces are 1 MiB slabs taken in turn from the shared pool (storage/bufferPool.ts), each valid only until the
     * consumer asks for the next piece (it writes it out and keeps no reference). A large upload
     * otherwise copies every network read into a fresh buffer, and V8 answers that much external
     * memory with major garbage collections.
     */
    readonly reusesPieces = false,
    private readonly highWater = 4 << 20,
    /** upload.minBytesPerSec: a body slower than this while its reader waits is cut with 408 */
    minimumRate: { limits: MinimumBodyRate; clock: TimerClock } | null = null,
  ) {
    this.rate = minimumRate && new BodyRateGuard(minimumRate.limits, minimumRate.clock, (e) => this.fail(e));
    res.onData((chunk, isLast) => {
      if (isLast) this.lastChunkCame = true;
      if (this.failure || this.done) return;
      this.received += chunk.byteLength;
      this.rate?.received(chunk.byteLength);
      if (this.received > this.limit) {
        this.fail(new ApiError('body_too_large', `request body exceeds the limit of ${this.limit} bytes`));
        return;
      }
      if (this.reusesPieces) this.fill(new Uint8Array(chunk), isLast);
      else if (chunk.byteLength > 0) {
        this.queue.push(Buffer.from(chunk.slice(0)));
        this.queued += chunk.byteLength;
      }
      if (isLast) this.done = true;
      else if (this.queued > this.highWater && !this.paused) {
        this.paused = true;
        res.pause();
      }
      this.notify();
    });
  }

  /** Called by the router when it refuses the request: no more reading, and a paused socket resumes (drain.ts drops the rest). */
  stopReading(): void {
    if (!this.failure) this.fail(new Error('the request was refused before its body was read'));
    this.release();
  }

  /**
   * Called by the router just before it answers: a socket still paused resumes. Chunks uWS already
   * read still arrive after pause(), the last one included, and a socket left paused after the
   * answer never reads the connection's next request (uWS's idle timeout then resets it under the
   * client). Not earlier: resume() arms uWS's 10 s timeout.
   */
  release(): void {
    if (!this.paused) return;
    this.paused = false;
    this.res.resume();
  }

  /** Called by the router when the client goes away. */
  abort(): void {
    this.fail(new Error('client aborted the request'));
  }

  /** Copies a network read into slabs; a full slab (or the last bytes) joins the queue. */
  private fill(bytes: Uint8Array, isLast: boolean): void {
    for (let at = 0; at < bytes.byteLength; ) {
      this.slab ??= mebibyteBuffers.take();
      const n = Math.min(bytes.byteLength - at, SLAB_BYTES - this.filled);
      this.slab.set(bytes.subarray(at, at + n), this.filled);
      this.filled += n;
      at += n;
      if (this.filled === SLAB_BYTES) this.enqueueSlab();
    }
    if (isLast && this.filled > 0) this.enqueueSlab();
  }

  private enqueueSlab(): void {
    const slab = this.slab!;
    this.queue.push(this.filled === SLAB_BYTES ? slab : slab.subarray(0, this.filled));
    this.queued += this.filled;
    this.slab = null;
    this.filled = 0;
  }

  /** The client sent its whole body (read or not: a failed stream stops reading). */
  get ended(): boolean {
    return this.lastChunkCame;
  }

  get bytesReceived(): number {
    return this.received;
  }

  private fail(e: Error): void {
    this.failure = e;
    this.rate?.stop();
    this.notify();
  }

  private notify(): void {
    const w = this.wake;
    this.wake = null;
    if (w) setImmediate(w);
  }

  async *[Symbol.asyncIterator](): AsyncIterator<Uint8Array> {
    try {
      yield* this.pieces();
    } finally {
      this.rate?.stop();
    }
  }

  private async *pieces(): AsyncGenerator<Uint8Array> {
    for (;;) {
      if (this.failure) throw this.failure;
      const next = this.queue.shift();
      if (next) {
        this.queued -= next.byteLength;
        // Once the last chunk came, the socket stays paused until release(): uWS's resume() arms
        // its 10 s timeout, which would cut a handler still working on the body (issue 22).
        if (this.paused && !this.lastChunkCame && this.queued < this.highWater / 2) {
          this.paused = false;
          this.res.resume();
        }
        if (this.reusesPieces) {
          // The consumer asked for this piece, so it is done with the last one. Only whole slabs
          // go back (the last, partial piece of a body is left to the garbage collector).
          if (this.lent !== null) mebibyteBuffers.give(this.lent);
          this.lent = next.byteLength === SLAB_BYTES ? next : null;
        }
        yield next;
        continue;
      }
      if (this.done) return;
      // Only time spent waiting here is the client's: the minimum rate is measured over it.
      this.rate?.waiting();
      await new Promise<void>((r) => (this.wake = r));
      this.rate?.fed();
    }
  }
}
