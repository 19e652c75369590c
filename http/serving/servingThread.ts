// A serving thread (`http.threads` > 1; docs/http.md, "Serving threads"): its own uWS app on the
// server's port (SO_REUSEPORT, the kernel spreads connections), answering anonymous narinfo GETs
// of readable caches from its hot memory, sending anonymous readers' NAR files itself from the
// filesystem blob store (threadNars.ts), and relaying everything else, WebSockets included, to the
// main thread's loopback listener, which owns the API, the sockets and the cache state.
import { monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';
import { parentPort, workerData } from 'node:worker_threads';
import uWS from 'uWebSockets.js';
import type { HttpRequest, HttpResponse, us_listen_socket } from 'uWebSockets.js';
import { forwardHttp, originAgent, type ForwardedAnswer, type ForwardOrigin } from './forwardHttp.js';
import { relayWebSockets } from './forwardWebSocket.js';
import { lateUpgrades } from './lateUpgrades.js';
import { DEFAULT_READ_PACE, SharedReadPlaces, shrinkHeapAtRest, ThreadReadLine, watchHeapAtRest } from '../../storage/threadFace.js';
import { MEDIUM_NAR_MIN_BYTES, NarMemory } from './narMemory.js';
import { ThreadHotCache } from './threadHotCache.js';
import { COUNTER_EXTERNAL_BYTES, COUNTER_FORWARDED, COUNTER_FROM_MEMORY, COUNTER_GC_COUNT, COUNTER_GC_MAX_MS, COUNTER_GC_TOTAL, COUNTER_GC_TOTAL_MS, COUNTER_HEAP_BYTES, COUNTER_LOOP_DELAY_MAX_MS, COUNTER_LOOP_DELAY_P99_MS, COUNTER_MEDIUM_NAR_BYTES, COUNTER_READS_HELD, COUNTER_READS_WAITING, COUNTER_REQUESTS, type FromServingThread, type ServingThreadData, type ToServingThread, MEMORY_REPORT_MS } from './threadMessages.js';
import { NarinfoRefreshes } from './narinfoRefreshes.js';
import { ThreadAnswers } from './threadAnswers.js';
import { threadNars } from './threadNars.js';

/** The thread's hot memory: narinfos are ~1-2 KiB, so this holds tens of thousands. */
const HOT_BYTES = 64 * 1024 * 1024;
/** Answers larger than this are not kept (a narinfo with thousands of references). */
const LEARN_MAX_BYTES = 64 * 1024;
const NARINFO = /^[0-9a-df-np-sv-z]{32}\.narinfo$/;
const STATUS_OK = '200 OK';
const STATUS_NOT_FOUND = '404 Not Found';
const CONTENT_TYPE = 'Content-Type';
const X_CACHE = 'X-Cache';

const data = workerData as ServingThreadData;
const port = parentPort!;
const counters = new Float64Array(data.counters);
// A hit naming a NAR file renews the thread's grant of it ahead of the NAR request (threadNars.ts).
const hot = new ThreadHotCache(HOT_BYTES, Date.now, (cache, fileHash) => nars.narinfoServed(cache, fileHash));
const origin: ForwardOrigin = { port: data.originPort, secret: data.secret, agent: originAgent() };
const post = (message: FromServingThread) => port.postMessage(message);
const answers = new ThreadAnswers(post, data.timesRequests);
const refreshes = new NarinfoRefreshes(hot, post);
const nars = threadNars({
  origin, enabled: data.sendsNars, counters, answers, // Small files oldest out (idle 0), medium ones only once idle for a minute (narMemory.ts).
  small: new NarMemory({ minFileBytes: 0, maxFileBytes: data.smallNars.maxFileBytes, budget: data.smallNars.budget, idleMs: 0 }),
  medium: new NarMemory({
    minFileBytes: MEDIUM_NAR_MIN_BYTES, maxFileBytes: data.mediumNars.maxFileBytes, budget: data.mediumNars.budget, idleMs: 60_000,
    report: (bytes) => { counters[COUNTER_MEDIUM_NAR_BYTES] = bytes; },
  }),
  line: data.readPlaces === null ? null : new ThreadReadLine({
    places: new SharedReadPlaces(data.readPlaces.limit, data.readPlaces.buffer), openTimeoutSecs: data.readPlaces.openTimeoutSecs,
    held: (change) => { counters[COUNTER_READS_HELD]! += change; },
    mainWaits: () => post({ t: 'readPlacesFreed' }),
    waitingNow: (count) => { counters[COUNTER_READS_WAITING] = count; },
  }),
  openTimeoutSecs: data.readPlaces?.openTimeoutSecs ?? 0, pace: data.readPlaces?.pace ?? DEFAULT_READ_PACE,
  ask: (id, cache, fileHash) => post({ t: 'narAsk', id, cache, fileHash }),
  report: (sent) => post({ t: 'narsSent', sent }),
});

// A narinfo request runs this, so it makes as little as it can: no closure, no string of its own
// (the cache name and file are uWS's), no clock read unless durations are observed. What is made
// per request is young garbage, and each young-generation collection is a pause for every
// connection of the thread (issue 22: the hit p99). A hit makes ~170 bytes, ~150 of them uWS's
// (its res and req objects, the two parameters' strings; docs/http.md, "What a hit allocates").
function answerFromMemory(res: HttpResponse, req: HttpRequest): void {
  const started = answers.started();
  counters[COUNTER_REQUESTS]!++;
  const cache = req.getParameter(0) ?? '';
  const file = req.getParameter(1) ?? '';
  const plain = req.getHeader('authorization') === '' && req.getHeader('content-length') === '' && req.getHeader('transfer-encoding') === '';
  if (plain && NARINFO.test(file) && !cache.includes('%')) {
    const answer = hot.get(cache, file, refreshes.refresh);
    if (answer !== undefined) {
      counters[COUNTER_FROM_MEMORY]!++;
      // uWS corks the socket for the length of its handler: no cork() of our own (and no closure).
      res.writeStatus(answer.status === 200 ? STATUS_OK : STATUS_NOT_FOUND).writeHeader(CONTENT_TYPE, answer.contentType);
      if (answer.xCache !== null) res.writeHeader(X_CACHE, answer.xCache);
      res.end(answer.body);
      answers.narinfo(cache, file, answer.status === 200);
      answers.request('get', answer.status, started);
      return;
    }
    forwardToLearn(res, req, cache, file);
    return;
  }
  counters[COUNTER_FORWARDED]!++;
  forwardHttp(res, req, origin);
}

/**
 * A narinfo memory cannot answer goes to the main thread, and its answer is learned. In a function
 * of its own: the closure made here captures the request's names, and a closure in
 * answerFromMemory made V8 give every call of it, hits included, a context for them.
 */
function forwardToLearn(res: HttpResponse, req: HttpRequest, cache: string, file: string): void {
  counters[COUNTER_FORWARDED]!++;
  const generation = hot.generation;
  forwardHttp(res, req, origin, { maxBytes: LEARN_MAX_BYTES, done: (a) => learnNarinfo(generation, cache, file, a) });
}

/**
 * How a cache's own miss begins (http/cache/narinfo.ts). A 404 for a cache that does not exist or
 * is hidden (`no cache "…"`) is not learned: any name would otherwise make the thread keep a
 * memory for it, unbounded, for anyone who sends names (review).
 */
const OWN_MISS = Buffer.from('{"error":true,"message":"cache \\"');

/** Only what the main thread answered from a narinfo of the cache (X-Cache: HIT) or as the cache's own miss; never an upstream's. */
function learnable(a: ForwardedAnswer): boolean {
  const type = a.headers['content-type'];
  if (typeof type !== 'string') return false;
  if (a.status === 200) return a.headers['x-cache'] === 'HIT';
  return a.status === 404 && type === 'application/json' && a.body.subarray(0, OWN_MISS.length).equals(OWN_MISS);
}

/** Learns the answer when memory may keep it; whether it was learned (not when an invalidation came since `generation`). */
function learnNarinfo(generation: number, cache: string, file: string, a: ForwardedAnswer): boolean {
  if (!learnable(a) || generation !== hot.generation) return false;
  const hit = a.status === 200;
  hot.learn(generation, cache, file, { status: a.status, contentType: a.headers['content-type']!, xCache: hit ? 'HIT' : null, body: a.body });
  return true;
}

// With TLS the thread ends it: the main thread listens on loopback only (docs/http.md, "TLS").
const app = data.tls === null ? uWS.App() : uWS.SSLApp({ cert_file_name: data.tls.certFile, key_file_name: data.tls.keyFile });
const late = await lateUpgrades();
relayWebSockets(app, origin, late);
app.get('/cache/:cache/:file', answerFromMemory);
app.get('/cache/:cache/nar/:file', (res, req) => nars.answer(res, req, false));
app.head('/cache/:cache/nar/:file', (res, req) => nars.answer(res, req, true));
app.any('/*', (res, req) => {
  counters[COUNTER_REQUESTS]!++;
  counters[COUNTER_FORWARDED]!++;
  forwardHttp(res, req, origin);
});

// What the thread's isolate holds, how long its loop stalled and how often its garbage collector
// paused it, for GET /api/v1/admin/actors (RSS is the whole process's): a stall here is every one
// of the thread's connections waiting (the tail of the answer times).
// monitorEventLoopDelay records the time between its samples, its own interval included (an idle
// loop reads ~10 ms at resolution 10): the figures reported are what exceeds the interval.
const LOOP_SAMPLE_MS = 10;
const loopDelay = monitorEventLoopDelay({ resolution: LOOP_SAMPLE_MS });
loopDelay.enable();
let collections = 0;
let longestCollection = 0;
const gc = new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    collections++;
    longestCollection = Math.max(longestCollection, entry.duration);
    counters[COUNTER_GC_TOTAL]!++;
    counters[COUNTER_GC_TOTAL_MS]! += entry.duration;
  }
});
gc.observe({ entryTypes: ['gc'] });
const memory = setInterval(() => {
  const usage = process.memoryUsage();
  counters[COUNTER_HEAP_BYTES] = usage.heapTotal;
  counters[COUNTER_EXTERNAL_BYTES] = usage.external;
  counters[COUNTER_LOOP_DELAY_P99_MS] = Math.max(0, loopDelay.percentile(99) / 1e6 - LOOP_SAMPLE_MS);
  counters[COUNTER_LOOP_DELAY_MAX_MS] = Math.max(0, loopDelay.max / 1e6 - LOOP_SAMPLE_MS);
  counters[COUNTER_GC_COUNT] = collections;
  counters[COUNTER_GC_MAX_MS] = longestCollection;
  loopDelay.reset();
  collections = 0;
  longestCollection = 0;
}, MEMORY_REPORT_MS);
memory.unref();

let listenSocket: us_listen_socket | null = null;
let stopHeapWatch = (): void => undefined;
app.listen(data.listenAddr, data.port, (socket) => {
  listenSocket = socket === false ? null : socket;
  post({ t: 'listening', ok: socket !== false });
  // The thread's start-up is over: its young generation back to its smallest, and again after each
  // later burst once the thread is at rest (storage/restingHeap.ts).
  if (socket !== false) {
    setImmediate(shrinkHeapAtRest);
    stopHeapWatch = watchHeapAtRest();
  }
});

/** Ends the thread cleanly: a thread that ends while it holds its listen socket aborts the process. */
function stop(): void {
  if (listenSocket !== null) uWS.us_listen_socket_close(listenSocket);
  listenSocket = null;
  clearInterval(memory);
  stopHeapWatch();
  loopDelay.disable();
  gc.disconnect();
  app.close();
  late.close();
  origin.agent.destroy();
  port.close();
}

port.on('message', (message: ToServingThread) => {
  switch (message.t) {
    case 'forgetPath':
      hot.forgetPath(message.hashPart);
      if (message.fileHash !== undefined) nars.grants.forgetFile(message.cacheId, message.fileHash);
      break;
    case 'forgetCache':
      hot.forgetCache(message.cache);
      nars.grants.forgetCache(message.cache);
      break;
    case 'narGrant':
      nars.granted(message.id, message.grant);
      break;
    case 'narinfoAnswers':
      refreshes.answered(message.answers);
      break;
    case 'stop':
      stop();
      break;
    case 'fail':
      throw new Error(message.reason);
    case 'reportNow':
      answers.reportNow();
      nars.reportNow();
      post({ t: 'reported', id: message.id });
      break;
  }
});

// A crash: the listen socket is closed and the connections dropped before the thread ends (ending
// while uWS holds them takes the whole process down); the supervisor starts a new thread.
process.on('uncaughtException', (error) => {
  console.error(`serving thread ${data.index} failed:`, error);
  stop();
  process.exit(1);
});
