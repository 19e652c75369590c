// The binary cache's traffic events, cache.narinfo.served and cache.nar.fetched (live only, never
// durable). They come from the hottest paths kiln has, so a request only appends to an array:
// the catalog check, the envelope and the bus (a Redis PUBLISH when redis.url is set) happen in a
// batch off the request path, at most MAX_PER_FLUSH per flush. Past that, under a flood of
// requests, the rest of the batch is dropped and counted: live feeds are best-effort anyway (the
// firehose drops on lag, spec: Firehose), and serving must not slow down to report itself.
import type { Events, KilnMetrics, TrafficCounters } from '../../storage/index.js';

const FLUSH_MS = 100;
/**
 * 1,000 traffic events a second per process at most: publishing one costs a catalog check, an
 * envelope and the bus (measured: at 5,000 a second it took a tenth of a busy server's requests).
 */
const MAX_PER_FLUSH = 100;

type Traffic =
  | { event: 'cache.narinfo.served'; cacheId: string; cache: string; hash: string; hit: boolean }
  | { event: 'cache.nar.fetched'; cacheId: string; cache: string; hash: string; bytes: number };

export interface CacheTraffic {
  /** a narinfo answered: hit is false for a 404; `upstream` when an upstream cache had it */
  served(cache: { id: string; name: string }, hash: string, hit: boolean, upstream?: boolean): void;
  /**
   * `count` narinfos of a cache answered elsewhere (a serving thread's memory, reported in batches):
   * counted as `served` counts them, with events for the `hashes` named
   */
  servedMany(cache: { id: string; name: string }, hit: boolean, count: number, hashes: readonly string[]): void;
  /** a NAR file sent (GET, not HEAD) `fetches` times (a serving thread's report counts them): `bytes` is what they carried together */
  fetched(cache: { id: string; name: string }, fileHash: string, bytes: number, fetches?: number): void;
  /** events dropped because a flush was full, since the start */
  readonly dropped: number;
  close(): void;
}

/**
 * `metrics` counts every answer (kiln_cache_*), even those whose event a full flush drops, and
 * `counters` (the stored per-minute series, docs/metrics.md) too.
 */
export function cacheTraffic(events: Pick<Events, 'publish'>, metrics?: Pick<KilnMetrics, 'narinfoAnswered' | 'narBytesServed'>, counters?: Pick<TrafficCounters, 'narinfo' | 'served'>): CacheTraffic {
  let pending: Traffic[] = [];
  let timer: NodeJS.Timeout | null = null;
  let dropped = 0;

  const flush = (): void => {
    timer = null;
    const batch = pending;
    pending = [];
    for (const item of batch) {
      const scope = { cacheId: item.cacheId };
      try {
        if (item.event === 'cache.narinfo.served') events.publish(item.event, { cache: item.cache, hash: item.hash, hit: item.hit }, scope);
        else events.publish(item.event, { cache: item.cache, hash: item.hash, bytes: item.bytes }, scope);
      } catch {
        // A content the catalog refuses, or a bus that failed: a report lost, never a crash in a timer.
        dropped++;
      }
    }
  };
  const add = (item: Traffic): void => {
    if (pending.length >= MAX_PER_FLUSH) {
      dropped++;
      return;
    }
    pending.push(item);
    // unref: a pending flush never keeps a stopping process alive.
    timer ??= setTimeout(flush, FLUSH_MS).unref();
  };

  return {
    served: (cache, hash, hit, upstream = false) => {
      const outcome = hit ? (upstream ? 'upstream' : 'hit') : 'miss';
      metrics?.narinfoAnswered(cache.name, outcome);
      counters?.narinfo(cache.id, outcome);
      add({ event: 'cache.narinfo.served', cacheId: cache.id, cache: cache.name, hash, hit });
    },
    servedMany: (cache, hit, count, hashes) => {
      const outcome = hit ? 'hit' : 'miss';
      metrics?.narinfoAnswered(cache.name, outcome, count);
      counters?.narinfo(cache.id, outcome, count);
      for (const hash of hashes) add({ event: 'cache.narinfo.served', cacheId: cache.id, cache: cache.name, hash, hit });
    },
    fetched: (cache, fileHash, bytes, fetches = 1) => {
      metrics?.narBytesServed(cache.name, bytes);
      counters?.served(cache.id, bytes, fileHash, fetches);
      // an event per fetch, each carrying its share, while the flush has room; the rest are dropped
      const each = Math.round(bytes / fetches);
      const room = Math.min(fetches, Math.max(0, MAX_PER_FLUSH - pending.length));
      for (let i = 0; i < room; i++) add({ event: 'cache.nar.fetched', cacheId: cache.id, cache: cache.name, hash: fileHash, bytes: each });
      dropped += fetches - room;
    },
    get dropped() {
      return dropped;
    },
    close() {
      if (timer) clearTimeout(timer);
      timer = null;
      pending = [];
    },
  };
}
