// The main thread's side of `http.threads` (docs/http.md, "Serving threads"): one worker thread
// per serving uWS app, each a supervised child (`http-thread-<n>` under `http-threads`) whose
// actor is the thread's life: the thread ending on its own is a crash, restarted within the
// restart budget, and only that thread's connections are lost. Invalidations reach every thread
// as messages; per-thread request counts are in GET /api/v1/admin/actors.
import { Worker } from 'node:worker_threads';
import { fromPromise } from 'xstate';
import { threadExecArgv } from '../../storage/index.js';
import type { Supervisor } from '../../supervisors/index.js';
import { forwardingSecret } from './forwardedPeer.js';
import type { NarinfoRenewal } from '../cache/narinfo.js';
import { narinfoAnswerer } from './narinfoRefreshes.js';
import type { ThreadNarServices } from './narGrants.js';
import type { ThreadAnswerCounts } from './threadAnswerCounts.js';
import { COUNTER_EXTERNAL_BYTES, COUNTER_FORWARDED, COUNTER_FROM_MEMORY, COUNTER_GC_COUNT, COUNTER_GC_MAX_MS, COUNTER_GC_TOTAL, COUNTER_GC_TOTAL_MS, COUNTER_HEAP_BYTES, COUNTER_LOOP_DELAY_MAX_MS, COUNTER_LOOP_DELAY_P99_MS, COUNTER_MEDIUM_NAR_BYTES, COUNTER_NARS, COUNTER_NARS_FROM_MEMORY, COUNTER_NARS_WAITED, COUNTER_READS_HELD, COUNTER_READS_WAITING, COUNTER_REQUESTS, COUNTER_STORAGE_BUSY, COUNTER_TOO_SLOW, COUNTERS, type FromServingThread, type ServingThreadData, type TlsFiles, type ToServingThread } from './threadMessages.js';

/**
 * How long a thread has to close its listen socket and end before it is terminated. Terminating a
 * thread that still holds uWS sockets aborts the whole process, so this is a last resort far
 * beyond a loaded machine's slowest clean stop (a thread still loading its module under load
 * takes seconds to read its first message).
 */
const STOP_MS = 60_000;
/** The longest a reader of the counts waits for a thread's report: a live thread answers within a turn of its loop. */
const REPORT_WAIT_MS = 250;
/** Each thread's memory of small NAR files, beside the main thread's hot cache: nar.hotCacheBytes caps each, not their sum (docs/http.md, "Totals"). */
const SMALL_NAR_BYTES = 64 * 1024 * 1024;
/**
 * Medium NAR files (above nar.smallBytes, up to MEDIUM_NAR_MAX_BYTES) each thread keeps in memory,
 * in all: sent from memory a file costs the thread one copy (into the socket) instead of two (the
 * read, then the socket), what nginx's sendfile is measured against (issue 22, 2 MiB NARs).
 */
const MEDIUM_NAR_BYTES = 32 * 1024 * 1024;
const MEDIUM_NAR_MAX_BYTES = 4 * 1024 * 1024;

export interface ServingThreadsOptions {
  count: number;
  listenAddr: string;
  port: number;
  /** the main thread's loopback listener */
  originPort: number;
  supervisor: Supervisor;
  /**
   * The route's answer to an anonymous narinfo GET, when a thread may keep it (http/cache/narinfo.ts,
   * anonymousNarinfo): how threads renew their hot memory, by message rather than a loopback request.
   */
  narinfos: (cache: string, hash: string, heldMiss: boolean) => Promise<NarinfoRenewal>;
  /** NAR files the threads send themselves (filesystem blob store); without it every NAR request is forwarded */
  nars?: ThreadNarServices;
  /** nar.smallBytes and nar.hotCacheBytes: each thread keeps small NAR files in memory within SMALL_NAR_BYTES of its own (0 disables, as for the main thread) */
  smallNars: { maxFileBytes: number; hotCacheBytes: number };
  /** counts what the threads answered themselves (metrics, traffic) */
  answers?: ThreadAnswerCounts;
  /** TLS on the port: each thread runs uWS's SSL app */
  tls?: TlsFiles;
  log: { info(o: object, msg: string): void; error(o: object, msg: string): void };
}

export interface ServingThreads {
  /** Sends to every running thread (invalidations). */
  broadcast(message: ToServingThread): void;
  /**
   * Has every running thread report what it answered and sent since its last batch, and resolves
   * once those reports are counted (or after `timeoutMs`: a thread that is restarting is not waited
   * for). Readers of the counts (a /metrics scrape, a traffic flush) call it first, so they see
   * every request answered before they were asked, not what the next 100 ms batch would bring.
   */
  collectReports(timeoutMs?: number): Promise<void>;
  /** Makes thread `index` fail as a bug in it would (tests). */
  crash(index: number): void;
  /** Incarnations of thread `index` so far (tests: a restart shows). */
  starts(index: number): number;
  /** Closes every thread's listen socket and waits for the threads to end. */
  stop(): Promise<void>;
}

export async function startServingThreads(opts: ServingThreadsOptions): Promise<ServingThreads> {
  const running = new Map<number, Worker>();
  const startCounts = new Map<number, number>();
  const counters = Array.from({ length: opts.count }, () => new SharedArrayBuffer(COUNTERS * Float64Array.BYTES_PER_ELEMENT));
  let stopping = false;
  let nextReport = 0;
  /** reports being counted (threadAnswerCounts finds each cache first): collectReports waits for them */
  const counting = new Set<Promise<void>>();

  const threadLogic = fromPromise<void, { index: number }>(({ input, signal }) => new Promise<void>((resolve, reject) => {
    const { index } = input;
    const data: ServingThreadData = {
      index, listenAddr: opts.listenAddr, port: opts.port, originPort: opts.originPort, secret: forwardingSecret(), sendsNars: opts.nars !== undefined, counters: counters[index]!, smallNars: { maxFileBytes: opts.smallNars.maxFileBytes, budget: Math.min(SMALL_NAR_BYTES, opts.smallNars.hotCacheBytes) },
      mediumNars: { maxFileBytes: MEDIUM_NAR_MAX_BYTES, budget: Math.min(MEDIUM_NAR_BYTES, opts.smallNars.hotCacheBytes) },
      readPlaces: opts.nars === undefined ? null : { buffer: opts.nars.readPlaces.buffer, limit: opts.nars.readPlaces.limit, openTimeoutSecs: opts.nars.readPlaces.openTimeoutSecs, pace: opts.nars.readPlaces.pace },
      tls: opts.tls ?? null, timesRequests: opts.answers?.timed ?? false,
    };
    const worker = new Worker(new URL('./servingThread.ts', import.meta.url), { workerData: data, execArgv: threadExecArgv(), name: `http-thread-${index}` });
    startCounts.set(index, (startCounts.get(index) ?? 0) + 1);
    running.set(index, worker);
    let ended = false;
    const end = () => {
      if (!ended) worker.postMessage({ t: 'stop' } satisfies ToServingThread);
    };
    signal.addEventListener('abort', end, { once: true });
    const answerNarinfos = narinfoAnswerer(opts.narinfos, (message) => worker.postMessage(message));
    worker.on('message', (m: FromServingThread) => {
      switch (m.t) {
        case 'listening':
          if (!m.ok) worker.postMessage({ t: 'stop' } satisfies ToServingThread);
          break;
        case 'narAsk':
          // A failed lookup grants nothing: the thread forwards, and the route answers the error.
          void (opts.nars?.grant(m.cache, m.fileHash) ?? Promise.resolve(null)).catch(() => null)
            .then((grant) => worker.postMessage({ t: 'narGrant', id: m.id, grant } satisfies ToServingThread));
          break;
        case 'narinfoAsks':
          answerNarinfos(m.asks);
          break;
        case 'narsSent':
          opts.nars?.sent(m.sent);
          break;
        case 'answered': {
          const counted = opts.answers?.answered(m.narinfos, m.requests);
          if (counted !== undefined) {
            counting.add(counted);
            void counted.finally(() => counting.delete(counted));
          }
          break;
        }
        case 'readPlacesFreed':
          opts.nars?.readPlaces.freed();
          break;
      }
    });
    worker.on('error', (e) => opts.log.error({ err: e, thread: index }, 'a serving thread failed'));
    worker.on('exit', (code) => {
      ended = true;
      // Reads a thread held end with it: their places are free again.
      const held = new Float64Array(counters[index]!);
      opts.nars?.readPlaces.freed(held[COUNTER_READS_HELD]!);
      held[COUNTER_READS_HELD] = 0;
      held[COUNTER_READS_WAITING] = 0;
      if (running.get(index) === worker) running.delete(index);
      if (stopping || signal.aborted) resolve();
      else reject(new Error(`serving thread ${index} ended (exit code ${code})`));
    });
  }));

  const ready: Promise<void>[] = [];
  for (let index = 0; index < opts.count; index++) {
    opts.supervisor.spawn({
      id: `http-thread-${index}`, kind: 'http-thread', logic: threadLogic, input: { index },
      summarize: () => {
        const c = new Float64Array(counters[index]!);
        return { requests: c[COUNTER_REQUESTS]!, fromMemory: c[COUNTER_FROM_MEMORY]!, forwarded: c[COUNTER_FORWARDED]!, nars: c[COUNTER_NARS]!, narsFromMemory: c[COUNTER_NARS_FROM_MEMORY]!, narsWaited: c[COUNTER_NARS_WAITED]!, readsHeld: c[COUNTER_READS_HELD]!, readsWaiting: c[COUNTER_READS_WAITING]!, storageBusy: c[COUNTER_STORAGE_BUSY]!, tooSlow: c[COUNTER_TOO_SLOW]!, heapBytes: c[COUNTER_HEAP_BYTES]!, externalBytes: c[COUNTER_EXTERNAL_BYTES]!, mediumNarBytes: c[COUNTER_MEDIUM_NAR_BYTES]!, loopDelayP99Ms: c[COUNTER_LOOP_DELAY_P99_MS]!, loopDelayMaxMs: c[COUNTER_LOOP_DELAY_MAX_MS]!, gcCount: c[COUNTER_GC_COUNT]!, gcMaxMs: c[COUNTER_GC_MAX_MS]!, gcTotal: c[COUNTER_GC_TOTAL]!, gcTotalMs: c[COUNTER_GC_TOTAL_MS]!, starts: startCounts.get(index) ?? 0 };
      },
    });
    ready.push(new Promise<void>((resolve, reject) => {
      const wait = () => {
        const worker = running.get(index);
        if (worker === undefined) {
          setTimeout(wait, 5);
          return;
        }
        const listening = (m: FromServingThread) => {
          if (m.t !== 'listening') return;
          worker.off('message', listening);
          if (m.ok) resolve();
          else reject(new Error(`serving thread ${index} cannot listen on ${opts.listenAddr}:${opts.port}`));
        };
        worker.on('message', listening);
      };
      wait();
    }));
  }
  await Promise.all(ready);
  opts.log.info({ threads: opts.count, port: opts.port }, 'serving threads listening');

  return {
    broadcast(message) {
      for (const worker of running.values()) worker.postMessage(message);
    },
    crash(index) {
      running.get(index)?.postMessage({ t: 'fail', reason: 'crashed on purpose' } satisfies ToServingThread);
    },
    async collectReports(timeoutMs = REPORT_WAIT_MS) {
      await Promise.all([...running.values()].map((worker) => new Promise<void>((resolve) => {
        const id = nextReport++;
        const done = (): void => {
          clearTimeout(timer);
          worker.off('message', reported);
          worker.off('exit', done);
          resolve();
        };
        const reported = (m: FromServingThread): void => {
          if (m.t === 'reported' && m.id === id) done();
        };
        const timer = setTimeout(done, timeoutMs);
        worker.on('message', reported);
        worker.once('exit', done);
        worker.postMessage({ t: 'reportNow', id } satisfies ToServingThread);
      })));
      await Promise.allSettled([...counting]);
    },
    starts: (index) => startCounts.get(index) ?? 0,
    async stop() {
      stopping = true;
      const workers = [...running.values()];
      await Promise.all(workers.map((worker) => new Promise<void>((resolve) => {
        const timer = setTimeout(() => void worker.terminate(), STOP_MS);
        worker.once('exit', () => {
          clearTimeout(timer);
          resolve();
        });
        worker.postMessage({ t: 'stop' } satisfies ToServingThread);
      })));
    },
  };
}
