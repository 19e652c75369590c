// GET /api/v1/caches/{cache}/metrics (docs/metrics.md, "Stored metrics"): the query of a cache's
// stored traffic series. `period` picks the level (minute counters, hour/day/week rollups); `from`
// and `to` are RFC 3339 instants, defaulting to a window that fits the period.
import { z } from 'zod';

/** The levels of the stored series: minutes (raw counts or minute rollups), then hour, day and week rollups. */
export const MetricsPeriodName = z.enum(['minute', 'hour', 'day', 'week']);
const TrafficPeriodName = MetricsPeriodName;

export const Instant = z.string().max(40).refine((s) => /^\d{4}-\d{2}-\d{2}T/.test(s) && !Number.isNaN(Date.parse(s)), 'an RFC 3339 instant such as 2026-11-26T12:00:00Z');

/** A rolled-up series' query: the period of its points and the window. */
export const PeriodWindowQuery = z.strictObject({
  period: TrafficPeriodName.optional(),
  from: Instant.optional(),
  to: Instant.optional(),
});
export type PeriodWindowQuery = z.infer<typeof PeriodWindowQuery>;
/** GET /caches/{cache}/metrics: its own object, so the OpenAPI description names it. */
export const CacheMetricsQuery = PeriodWindowQuery.extend({});
export type CacheMetricsQuery = PeriodWindowQuery;

/** At most this many periods in one answer: a wider window needs a coarser period. */
export const CACHE_METRICS_MAX_POINTS = 1500;

/** Narinfo hits and misses, upstream hits and NAR bytes served over some span. */
const TrafficFields = {
  narinfo_hits: z.number().int(),
  narinfo_misses: z.number().int(),
  upstream_hits: z.number().int(),
  nar_bytes_served: z.number().int(),
  /** hits (stored or upstream) over narinfo requests; null with none */
  hit_ratio: z.number().nullable(),
};
const TrafficView = z.strictObject(TrafficFields);

/** GET /caches/{cache}/metrics: one point per period from `from` to `to`. */
export const CacheMetricsSeries = z.strictObject({
  cache: z.string(),
  period: TrafficPeriodName,
  from: z.string(),
  to: z.string(),
  points: z.array(z.strictObject({ start: z.string(), ...TrafficFields })),
});
export type CacheMetricsSeries = z.infer<typeof CacheMetricsSeries>;

/** GET /board/cache (each): a cache the caller may see, its size and recent traffic. */
export const CacheBoardView = z.strictObject({
  cache: z.string(),
  paths: z.number().int(),
  bytes: z.number().int(),
  last_hour: TrafficView,
  last_day: TrafficView,
  top_paths: z.array(z.strictObject({ store_path: z.string().nullable(), file_hash: z.string(), fetches: z.number().int(), bytes: z.number().int() })),
});
export type CacheBoardView = z.infer<typeof CacheBoardView>;
