// What a serving thread answered itself, reported to the main thread in batches (docs/metrics.md,
// "Serving threads"): narinfo hits and misses from the thread's memory, and the requests it answered
// (narinfos, NAR files, refusals), so that /metrics, the per-minute counters and the live traffic
// events count them as they count the main thread's own answers. A request only adds to a map;
// one message every REPORT_MS carries the lot. Durations are measured only when the main thread
// observes them (metrics on): a clock read and a number kept per request otherwise made for nothing.
import { performance } from 'node:perf_hooks';
import type { AnsweredRequests, FromServingThread, NarinfosServed } from './threadMessages.js';

const REPORT_MS = 100;
/** narinfo hashes named per cache, outcome and report, for the live events (which keep at most 100 per 100 ms in all anyway) */
const HASHES_PER_REPORT = 32;

export class ThreadAnswers {
  // Keyed without a string made per request (a hit and a miss map of the cache name as given, and
  // the status by method): these run on every answer a thread gives, and every string made there
  // is young garbage and a hash to compute.
  private hits = new Map<string, NarinfosServed>();
  private misses = new Map<string, NarinfosServed>();
  private gets = new Map<number, AnsweredRequests>();
  private heads = new Map<number, AnsweredRequests>();
  private timer: NodeJS.Timeout | null = null;
  // Made once: an arrow made inside later() would make V8 allocate later()'s context on every call,
  // twice per request (a fifth of what a narinfo answer allocated).
  private readonly flushNow = (): void => this.flush();

  /** `timed`: request durations are wanted (the main thread observes them) */
  constructor(private readonly post: (message: FromServingThread) => void, private readonly timed: boolean) {}

  /** When a request began, for request(): performance.now() when durations are wanted, else 0. */
  started(): number {
    return this.timed ? performance.now() : 0;
  }

  /** A narinfo answered from memory: `cache` as the URL spells it (the main thread finds the cache), `file` as `{hash}.narinfo`. */
  narinfo(cache: string, file: string, hit: boolean): void {
    const byCache = hit ? this.hits : this.misses;
    let served = byCache.get(cache);
    if (served === undefined) byCache.set(cache, (served = { cache, hit, count: 0, hashes: [] }));
    served.count++;
    if (served.hashes.length < HASHES_PER_REPORT) served.hashes.push(file.slice(0, 32));
    this.later();
  }

  /** A request the thread answered itself, begun at `started` (from started()) and answered now. */
  request(method: 'get' | 'head', status: number, started: number): void {
    const byStatus = method === 'get' ? this.gets : this.heads;
    let answered = byStatus.get(status);
    if (answered === undefined) byStatus.set(status, (answered = { method, status, count: 0, seconds: [] }));
    answered.count++;
    if (this.timed) answered.seconds.push((performance.now() - started) / 1000);
    this.later();
  }

  private later(): void {
    if (this.timer === null) this.timer = setTimeout(this.flushNow, REPORT_MS).unref();
  }

  /** Sends what is waiting for the next batch now (a reader of the counts asked), if anything is. */
  reportNow(): void {
    if (this.timer === null) return;
    clearTimeout(this.timer);
    this.flush();
  }

  private flush(): void {
    this.timer = null;
    const narinfos = [...this.hits.values(), ...this.misses.values()];
    const requests = [...this.gets.values(), ...this.heads.values()];
    this.hits = new Map();
    this.misses = new Map();
    this.gets = new Map();
    this.heads = new Map();
    this.post({ t: 'answered', narinfos, requests });
  }
}
