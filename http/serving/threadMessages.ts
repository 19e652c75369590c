// What the main thread and a serving thread say to each other (docs/http.md, "Serving threads"):
// plain structured-clone messages over the worker's port, no shared objects but the counters and
// the count of storage read places.
import type { ReadPaceLimits } from '../../storage/threadFace.js';
import type { NarinfoRenewal } from '../cache/narinfo.js';

/** Given to a serving thread when it starts (worker_threads workerData). */
export interface ServingThreadData {
  index: number;
  listenAddr: string;
  port: number;
  /** the main thread's loopback listener, where everything a thread cannot answer goes */
  originPort: number;
  /** forwardedPeer.ts: proves to the main thread that a forwarded peer address is a thread's */
  secret: string;
  /** whether the thread may ask for NAR grants (the blob store has local files: not S3) */
  sendsNars: boolean;
  /** the COUNTER_* cells below: written by the thread only, read by the main thread (and zeroed by it once the thread ended) */
  counters: SharedArrayBuffer;
  /** small NAR files the thread keeps in memory once read: up to nar.smallBytes each, `budget` bytes in all */
  smallNars: { maxFileBytes: number; budget: number };
  /** medium NAR files (above nar.smallBytes) the thread keeps in memory once read: up to `maxFileBytes` each, `budget` bytes in all */
  mediumNars: { maxFileBytes: number; budget: number };
  /**
   * nar.maxConcurrentDownloads shared with the main thread (storage/nars/sharedReadPlaces.ts), when
   * the thread sends NARs; nar.storageOpenTimeoutSecs and the minimum pace of a held read, as the
   * main thread's gate applies them
   */
  readPlaces: { buffer: SharedArrayBuffer; limit: number; openTimeoutSecs: number; pace: ReadPaceLimits } | null;
  /** tls.certFile / tls.keyFile: the thread's app is uWS's SSL app */
  tls: TlsFiles | null;
  /** whether the main thread observes the durations of the requests a thread answers (metrics on) */
  timesRequests: boolean;
}

/** PEM files of the certificate chain and its key (checked by tlsFiles.ts before any thread starts). */
export interface TlsFiles {
  certFile: string;
  keyFile: string;
}

export const COUNTER_REQUESTS = 0;
export const COUNTER_FROM_MEMORY = 1;
export const COUNTER_FORWARDED = 2;
export const COUNTER_NARS = 3;
/** places of nar.maxConcurrentDownloads the thread holds: given back by the main thread if it ends holding them */
export const COUNTER_READS_HELD = 4;
/** NAR files (among COUNTER_NARS) answered from the thread's memory of small files */
export const COUNTER_NARS_FROM_MEMORY = 5;
/** GETs refused 503 storage_busy: no read place came within nar.storageOpenTimeoutSecs */
export const COUNTER_STORAGE_BUSY = 6;
/** reads that lost their place below the minimum pace (storage/nars/readPace.ts), their connections closed */
export const COUNTER_TOO_SLOW = 7;
/** readers waiting in the thread's line for a read place */
export const COUNTER_READS_WAITING = 8;
/** the thread's V8 heap (heapTotal) and what its isolate holds outside it (external, ArrayBuffers included), bytes, every MEMORY_REPORT_MS */
export const COUNTER_HEAP_BYTES = 9;
export const COUNTER_EXTERNAL_BYTES = 10;
/** how late the thread's event loop ran over the last MEMORY_REPORT_MS, milliseconds beyond the 10 ms sampling interval: its 99th percentile and its longest */
export const COUNTER_LOOP_DELAY_P99_MS = 11;
export const COUNTER_LOOP_DELAY_MAX_MS = 12;
/** the thread's garbage collections over the last MEMORY_REPORT_MS: how many, and the longest pause, milliseconds */
export const COUNTER_GC_COUNT = 13;
export const COUNTER_GC_MAX_MS = 14;
/** NAR requests that waited for the main thread's grant (none live, or its ask under way): one message round trip each */
export const COUNTER_NARS_WAITED = 15;
/** bytes the thread's memory of medium NAR files holds: kept files (in use ones included) and reads given room (mediumNarMemory.ts) */
export const COUNTER_MEDIUM_NAR_BYTES = 16;
/** the thread's garbage collections since it started, and their pauses summed (milliseconds): benches divide them by the requests answered meanwhile */
export const COUNTER_GC_TOTAL = 17;
export const COUNTER_GC_TOTAL_MS = 18;
export const COUNTERS = 19;
/** How often a thread writes its memory and event-loop figures into its counters. */
export const MEMORY_REPORT_MS = 1_000;

/**
 * The main thread's word that a request without credentials may read a NAR file of a cache, and
 * where the file is: what its route would send, decided by the same gate (http/cache/cacheGate.ts).
 */
export interface NarGrant {
  cacheId: string;
  /** the cache's name as stored (events and metrics name it so) */
  cache: string;
  fileHash: string;
  fileSize: number;
  /** the blob's local file */
  path: string;
}

/** NAR files a thread sent since its last report, for the main thread's traffic counters and events (cacheTraffic.ts): one entry per file and grant, its GETs counted. */
export interface NarSent {
  cacheId: string;
  cache: string;
  fileHash: string;
  /** what all `fetches` carried together */
  bytes: number;
  fetches: number;
}

/** narinfos of one cache (as the URL spells it) answered from a thread's memory since its last report. */
export interface NarinfosServed {
  cache: string;
  hit: boolean;
  count: number;
  /** some of their hashes, for the live events */
  hashes: string[];
}

/** Requests a thread answered itself since its last report, by method and status. */
export interface AnsweredRequests {
  method: 'get' | 'head';
  status: number;
  count: number;
  /** each answer's time from its request to its end */
  seconds: number[];
}

/** An entry of a thread's hot memory to renew (narinfoRefreshes.ts): the route's answer to an anonymous GET of /cache/{cache}/{hash}.narinfo. */
export interface NarinfoAsk {
  id: number;
  cache: string;
  hash: string;
  /** the thread holds a miss: 'miss' answers that it still is one, without a body */
  heldMiss: boolean;
}

/** Main → thread. */
export type ToServingThread =
  /** a path was uploaded, deleted, re-signed or collected: forget its narinfo in every cache, and the cache's grant of its NAR file */
  | { t: 'forgetPath'; cacheId: string; hashPart: string; fileHash?: string }
  /** a cache's settings or access changed (cache.changed): forget what the thread knows of it */
  | { t: 'forgetCache'; cache: string }
  /** the answer to a narAsk: null sends the request to the main thread */
  | { t: 'narGrant'; id: number; grant: NarGrant | null }
  /** answers to narinfoAsks, as they come: null when memory may not keep it (a refusal, an upstream's narinfo, an error) */
  | { t: 'narinfoAnswers'; answers: { id: number; answer: NarinfoRenewal }[] }
  /** close the listen socket, finish the connections, end the thread */
  | { t: 'stop' }
  /** throw, as a bug in the thread would (tests: the crash path) */
  | { t: 'fail'; reason: string }
  /** report what was answered and sent since the last batch now, then say `reported` (a scrape or a traffic flush is about to read the counts) */
  | { t: 'reportNow'; id: number };

/** Thread → main. */
export type FromServingThread =
  | { t: 'listening'; ok: boolean }
  /** may a request without credentials read nar/<fileHash>.nar.zst of cache `cache`? */
  | { t: 'narAsk'; id: number; cache: string; fileHash: string }
  | { t: 'narsSent'; sent: NarSent[] }
  /** what the thread answered itself (threadAnswers.ts), for metrics and traffic */
  | { t: 'answered'; narinfos: NarinfosServed[]; requests: AnsweredRequests[] }
  /** renew entries of the thread's hot memory, asked for in one batch */
  | { t: 'narinfoAsks'; asks: NarinfoAsk[] }
  /** the thread gave back a place of nar.maxConcurrentDownloads while the main thread had readers waiting */
  | { t: 'readPlacesFreed' }
  /** the answer to reportNow, after the batches it sent (one port: they arrive first) */
  | { t: 'reported'; id: number };
