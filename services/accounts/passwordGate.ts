// argon2 (node-argon2, an N-API AsyncWorker) runs on libuv's thread pool: 4 threads per process
// by default, shared with every file read, zlib stream and DNS lookup of the server. Unbounded,
// 60 wrong-password logins from 3 addresses queued ahead of a 6 ms `serve/` read and made it take
// 10.8 s. The gate lets PASSWORD_HASH_CONCURRENCY hashes at a time reach the pool (each one
// already keeps 4 cores busy: parallelism 4), queues up to PASSWORD_HASH_MAX_WAITING more in
// arrival order, and refuses the rest with 503 password_busy, so a flood of logins never holds
// more than one of the pool's threads and never grows memory (64 MiB per hash) without bound.
// The pool is per process, and so is the gate: one instance, shared by every server in it.
import { ApiError } from '../../protocol/index.js';

export const PASSWORD_HASH_CONCURRENCY = 1;
export const PASSWORD_HASH_MAX_WAITING = 32;
/** What a refused client is told to wait (Retry-After): a queue of 32 drains in a few seconds. */
export const PASSWORD_BUSY_RETRY_AFTER_SECS = 2;

export interface PasswordGateStats {
  cap: number;
  maxWaiting: number;
  /** hashes running now (on the libuv pool) */
  inFlight: number;
  /** the most that ever ran at once: never above `cap` */
  peakInFlight: number;
  waiting: number;
  /** refused with password_busy since start */
  refused: number;
}

export class PasswordGate {
  #inFlight = 0;
  #peak = 0;
  #refused = 0;
  readonly #queue: (() => void)[] = [];

  constructor(
    readonly cap: number,
    readonly maxWaiting: number,
  ) {
    if (!(cap >= 1) || !(maxWaiting >= 0)) throw new Error(`a password gate needs cap >= 1 and maxWaiting >= 0, got ${cap}, ${maxWaiting}`);
  }

  /** Runs `hash` when a slot is free; throws ApiError password_busy when the queue is full. */
  async run<T>(hash: () => Promise<T>): Promise<T> {
    if (this.#inFlight < this.cap) {
      this.#inFlight++;
    } else {
      if (this.#queue.length >= this.maxWaiting) {
        this.#refused++;
        throw new ApiError('password_busy', `too many password checks in progress on this server; retry in ${PASSWORD_BUSY_RETRY_AFTER_SECS} s`, {
          headers: { 'Retry-After': String(PASSWORD_BUSY_RETRY_AFTER_SECS) },
        });
      }
      // The finishing hash hands its slot over: #inFlight already counts this one when it wakes.
      await new Promise<void>((resolve) => this.#queue.push(resolve));
    }
    this.#peak = Math.max(this.#peak, this.#inFlight);
    try {
      return await hash();
    } finally {
      const next = this.#queue.shift();
      if (next) next();
      else this.#inFlight--;
    }
  }

  stats(): PasswordGateStats {
    return {
      cap: this.cap, maxWaiting: this.maxWaiting, inFlight: this.#inFlight, peakInFlight: this.#peak,
      waiting: this.#queue.length, refused: this.#refused,
    };
  }
}

/** The process's gate: every argon2 hash and verification of kiln goes through it. */
export const passwordGate = new PasswordGate(PASSWORD_HASH_CONCURRENCY, PASSWORD_HASH_MAX_WAITING);
