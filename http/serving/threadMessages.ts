// What the main thread and a serving thread say to each other (docs/http.md, "Serving threads"):
// plain structured-clone messages over the worker's port, no shared objects but the counters.

/** Given to a serving thread when it starts (worker_threads workerData). */
export interface ServingThreadData {
  index: number;
  listenAddr: string;
  port: number;
  /** the main thread's loopback listener, where everything a thread cannot answer goes */
  originPort: number;
  /** forwardedPeer.ts: proves to the main thread that a forwarded peer address is a thread's */
  secret: string;
  /** [requests, answered from memory, forwarded]: written by the thread only, read by the main thread */
  counters: SharedArrayBuffer;
}

export const COUNTER_REQUESTS = 0;
export const COUNTER_FROM_MEMORY = 1;
export const COUNTER_FORWARDED = 2;
export const COUNTERS = 3;

/** Main → thread. */
export type ToServingThread =
  /** a path was uploaded, deleted, re-signed or collected: forget its narinfo in every cache */
  | { t: 'forgetPath'; hashPart: string }
  /** a cache's settings or access changed (cache.changed): forget what the thread knows of it */
  | { t: 'forgetCache'; cache: string }
  /** close the listen socket, finish the connections, end the thread */
  | { t: 'stop' }
  /** throw, as a bug in the thread would (tests: the crash path) */
  | { t: 'fail'; reason: string };

/** Thread → main. */
export type FromServingThread = { t: 'listening'; ok: boolean };
