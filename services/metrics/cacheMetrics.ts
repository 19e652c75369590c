// Reading the stored cache traffic (docs/metrics.md, "Stored metrics"): a cache's time series, for
// whoever may see the cache (viewCache; 404 otherwise, as for the cache itself), and the cache
// board, per cache the caller may see: stored paths and bytes, traffic of the last hour and day, and
// its most fetched NAR files since yesterday (UTC days; metrics.labelTopn of them).
import type { CacheMetricsQuery, Permission } from '../../protocol/index.js';
import { storedTotalsOf, topFetchedPaths, trafficSeries, trafficTotalsSince, type Sql, type TrafficCounts } from '../../storage/index.js';
import type { Principal } from '../access/index.js';
import type { Clock } from '../../supervisors/index.js';
import { PERIOD_MS, periodWindow } from './periodWindow.js';

interface TrafficView {
  narinfo_hits: number;
  narinfo_misses: number;
  upstream_hits: number;
  nar_bytes_served: number;
  /** hits (stored or upstream) over narinfo requests; null with none */
  hit_ratio: number | null;
}

const trafficView = (c: TrafficCounts | undefined): TrafficView => {
  const hits = (c?.narinfoHits ?? 0) + (c?.upstreamHits ?? 0);
  const requests = hits + (c?.narinfoMisses ?? 0);
  return {
    narinfo_hits: c?.narinfoHits ?? 0, narinfo_misses: c?.narinfoMisses ?? 0, upstream_hits: c?.upstreamHits ?? 0,
    nar_bytes_served: c?.narBytesServed ?? 0, hit_ratio: requests === 0 ? null : +(hits / requests).toFixed(4),
  };
};

export interface CacheMetricsDeps {
  sql: Sql;
  clock: Clock;
  /** metrics.labelTopn: the board's top fetched paths per cache */
  labelTopn: number;
  caches: {
    demandRecord(who: Principal, name: string, permission: Permission): Promise<{ row: { id: string; name: string } }>;
    list(who: Principal): Promise<{ id: string; name: string }[]>;
  };
}

export function cacheMetricsService({ sql, clock, caches, labelTopn }: CacheMetricsDeps) {
  return {
    async series(who: Principal, cache: string, query: CacheMetricsQuery) {
      const { row } = await caches.demandRecord(who, cache, 'viewCache');
      const { period, from, to } = periodWindow(query, clock.now());
      const points = await trafficSeries(sql, row.id, period, from, to);
      return {
        cache: row.name, period, from: from.toISOString(), to: to.toISOString(),
        points: points.map((p) => ({ start: p.start.toISOString(), ...trafficView(p) })),
      };
    },

    /** GET /board/cache: every cache the caller may see, largest traffic of the day first. */
    async board(who: Principal) {
      const visible = await caches.list(who);
      const ids = visible.map((c) => c.id);
      const now = clock.now().getTime();
      const since = new Date(now - PERIOD_MS.day);
      const [stored, hour, day, top] = await Promise.all([
        storedTotalsOf(sql, ids), trafficTotalsSince(sql, ids, new Date(now - PERIOD_MS.hour)), trafficTotalsSince(sql, ids, since),
        topFetchedPaths(sql, ids, since, labelTopn),
      ]);
      const rows = visible.map((c) => ({
        cache: c.name, paths: stored.get(c.id)?.paths ?? 0, bytes: stored.get(c.id)?.bytes ?? 0,
        last_hour: trafficView(hour.get(c.id)), last_day: trafficView(day.get(c.id)), top_paths: top.get(c.id) ?? [],
      }));
      const requests = (r: (typeof rows)[number]) => r.last_day.narinfo_hits + r.last_day.narinfo_misses + r.last_day.upstream_hits;
      return rows.sort((a, b) => requests(b) - requests(a) || a.cache.localeCompare(b.cache));
    },
  };
}
export type CacheMetricsService = ReturnType<typeof cacheMetricsService>;
