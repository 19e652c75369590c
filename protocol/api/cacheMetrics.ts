// GET /api/v1/caches/{cache}/metrics (docs/metrics.md, "Stored metrics"): the query of a cache's
// stored traffic series. `period` picks the level (minute counters, hour/day/week rollups); `from`
// and `to` are RFC 3339 instants, defaulting to a window that fits the period.
import { z } from 'zod';

const TrafficPeriodName = z.enum(['minute', 'hour', 'day', 'week']);

export const Instant = z.string().max(40).refine((s) => /^\d{4}-\d{2}-\d{2}T/.test(s) && !Number.isNaN(Date.parse(s)), 'an RFC 3339 instant such as 2026-11-26T12:00:00Z');

export const CacheMetricsQuery = z.strictObject({
  period: TrafficPeriodName.optional(),
  from: Instant.optional(),
  to: Instant.optional(),
});
export type CacheMetricsQuery = z.infer<typeof CacheMetricsQuery>;

/** At most this many points in one answer: a wider window needs a coarser period. */
export const CACHE_METRICS_MAX_POINTS = 1500;
