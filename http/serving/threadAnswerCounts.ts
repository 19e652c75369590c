// The main thread's side of what serving threads answered themselves (threadAnswers.ts; docs/
// metrics.md): narinfos from a thread's memory count toward kiln_cache_narinfo_requests_total, the
// per-minute counters and cache.narinfo.served as the route's own answers do, and every answer a
// thread gave toward kiln_http_request_duration_seconds (group `cache`).
import type { Services } from '../../services/index.js';
import type { NarStorage } from '../../storage/index.js';
import { anonymousReadableCache } from '../cache/cacheGate.js';
import type { AnsweredRequests, NarinfosServed } from './threadMessages.js';

/** The HTTP histogram's observer (http/server.ts's RequestObserver), when metrics are on. */
type Observe = (group: string, method: string, status: number, seconds: number) => void;

export interface ThreadAnswerCounts {
  /** whether request durations are observed: the threads measure them only then */
  readonly timed: boolean;
  /** resolves once the narinfos are counted (their caches are found by the memo, which may read the database) */
  answered(narinfos: readonly NarinfosServed[], requests: readonly AnsweredRequests[]): Promise<void>;
}

export function threadAnswerCounts(services: Pick<Services, 'binaryCache' | 'caches'>, nars: Pick<NarStorage, 'countThreadMemoryHits'>, observe?: Observe): ThreadAnswerCounts {
  const countNarinfos = async (served: NarinfosServed): Promise<void> => {
    // The thread answered an anonymous reader from what the main thread told it (a public cache, or
    // one the main thread let it answer): the cache as the route names it, from the same memo.
    const cache = await anonymousReadableCache(services.binaryCache, served.cache).catch(() => null);
    if (cache === null) return;
    services.caches.traffic.servedMany(cache, served.hit, served.count, served.hashes);
  };
  return {
    timed: observe !== undefined,
    async answered(narinfos, requests) {
      // each was an entry found in a thread's memory: a hit of the in-memory cache, as the main thread's own would be
      for (const served of narinfos) nars.countThreadMemoryHits(served.count);
      if (observe !== undefined) for (const r of requests) for (const seconds of r.seconds) observe('cache', r.method, r.status, seconds);
      await Promise.all(narinfos.map(countNarinfos));
    },
  };
}
