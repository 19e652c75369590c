// Stored cache traffic (0025_cache_traffic.sql, docs/metrics.md "Stored metrics"): per-minute
// counters added to by every server process, their hour/day/week rollups, their retention, and
// the reads behind the cache metrics API and the cache board.
import type { Queryable as ISql } from './queryable.js';
import { KEEP_ALL, recomputeFrom, type RetentionCutoffs } from './rollupEdge.js';
import { deleteInSlices } from './sliceDeletes.js';

export interface TrafficCounts {
  narinfoHits: number;
  narinfoMisses: number;
  upstreamHits: number;
  narBytesServed: number;
}

export interface TrafficMinute extends TrafficCounts {
  cacheId: string;
  /** the minute's start */
  minute: Date;
}

export type TrafficPeriod = 'minute' | 'hour' | 'day' | 'week';

interface TrafficPoint extends TrafficCounts {
  start: Date;
}

interface CountColumns {
  narinfo_hits: string;
  narinfo_misses: string;
  upstream_hits: string;
  nar_bytes_served: string;
}

const countsOf = (row: CountColumns): TrafficCounts => ({
  narinfoHits: Number(row.narinfo_hits), narinfoMisses: Number(row.narinfo_misses),
  upstreamHits: Number(row.upstream_hits), narBytesServed: Number(row.nar_bytes_served),
});

/** Adds counts to their minutes (a process's flush). Rows of caches deleted meanwhile are skipped. */
export async function addTrafficMinutes(sql: ISql, rows: readonly TrafficMinute[]): Promise<void> {
  if (rows.length === 0) return;
  await sql`
    insert into cache_traffic_minutes (cache_id, minute, narinfo_hits, narinfo_misses, upstream_hits, nar_bytes_served)
    select u.cache_id, u.minute, u.hits, u.misses, u.upstream, u.bytes
    from unnest(${sql.array(rows.map((r) => r.cacheId))}::uuid[], ${sql.array(rows.map((r) => r.minute.toISOString()))}::timestamptz[],
                ${sql.array(rows.map((r) => r.narinfoHits))}::bigint[], ${sql.array(rows.map((r) => r.narinfoMisses))}::bigint[],
                ${sql.array(rows.map((r) => r.upstreamHits))}::bigint[], ${sql.array(rows.map((r) => r.narBytesServed))}::bigint[])
      as u (cache_id, minute, hits, misses, upstream, bytes)
    join caches c on c.id = u.cache_id
    on conflict (cache_id, minute) do update set
      narinfo_hits = cache_traffic_minutes.narinfo_hits + excluded.narinfo_hits,
      narinfo_misses = cache_traffic_minutes.narinfo_misses + excluded.narinfo_misses,
      upstream_hits = cache_traffic_minutes.upstream_hits + excluded.upstream_hits,
      nar_bytes_served = cache_traffic_minutes.nar_bytes_served + excluded.nar_bytes_served`;
}

/**
 * One rollup pass: hours from minutes, days from hours, weeks from days (UTC; weeks start on
 * Monday). Each level is recomputed, not added to, from one period before its latest rollup on:
 * passes may overlap and run in several processes, and a flush up to a period late is still
 * counted. Older rollups are left alone, so pruning the level below never changes them.
 */
export async function rollUpTraffic(sql: ISql, cutoffs: RetentionCutoffs = KEEP_ALL): Promise<void> {
  const levels = [['hour', 'cache_traffic_minutes', 'minute', null], ['day', 'cache_traffic_rollups', 'start', 'hour'], ['week', 'cache_traffic_rollups', 'start', 'day']] as const;
  for (const [period, table, column, below] of levels) {
    const source = below === null ? sql`true` : sql`period = ${below}`;
    // Only periods whose rows below are all still kept (storage/db/rollupEdge.ts); day rollups are never deleted.
    const from = recomputeFrom(below === null ? cutoffs.raw : below === 'hour' ? cutoffs.rollups : null);
    const whole = from === null ? sql`` : sql`and date_trunc(${period}, ${sql(column)}, 'UTC') >= ${from}`;
    await sql`
      insert into cache_traffic_rollups (cache_id, period, start, narinfo_hits, narinfo_misses, upstream_hits, nar_bytes_served)
      select cache_id, ${period}, date_trunc(${period}, ${sql(column)}, 'UTC'),
             sum(narinfo_hits), sum(narinfo_misses), sum(upstream_hits), sum(nar_bytes_served)
      from ${sql(table)}
      where ${source} and ${sql(column)} >= coalesce(
        (select max(start) - ${`1 ${period}`}::interval from cache_traffic_rollups where period = ${period}), '-infinity') ${whole}
      group by 1, 3
      on conflict (cache_id, period, start) do update set
        narinfo_hits = excluded.narinfo_hits, narinfo_misses = excluded.narinfo_misses,
        upstream_hits = excluded.upstream_hits, nar_bytes_served = excluded.nar_bytes_served`;
  }
}

/** Deletes minutes before `rawBefore` and hour rollups before `rollupBefore` (null keeps them); how many rows. */
export async function pruneTraffic(sql: ISql, cutoffs: { rawBefore: Date | null; rollupBefore: Date | null }): Promise<number> {
  let deleted = 0;
  const { rawBefore, rollupBefore } = cutoffs;
  if (rawBefore !== null) {
    deleted += await deleteInSlices(async (limit) => (await sql`
      delete from cache_traffic_minutes where ctid in (select ctid from cache_traffic_minutes where minute < ${rawBefore} limit ${limit})`).count);
  }
  if (rollupBefore !== null) {
    deleted += await deleteInSlices(async (limit) => (await sql`
      delete from cache_traffic_rollups where ctid in (
        select ctid from cache_traffic_rollups where period = 'hour' and start < ${rollupBefore} limit ${limit})`).count);
  }
  return deleted;
}

/** A cache's points of one period with from <= start < to, oldest first. */
export async function trafficSeries(sql: ISql, cacheId: string, period: TrafficPeriod, from: Date, to: Date): Promise<TrafficPoint[]> {
  const rows = period === 'minute'
    ? await sql<(CountColumns & { start: Date })[]>`
        select minute as start, narinfo_hits, narinfo_misses, upstream_hits, nar_bytes_served from cache_traffic_minutes
        where cache_id = ${cacheId} and minute >= ${from} and minute < ${to} order by minute`
    : await sql<(CountColumns & { start: Date })[]>`
        select start, narinfo_hits, narinfo_misses, upstream_hits, nar_bytes_served from cache_traffic_rollups
        where cache_id = ${cacheId} and period = ${period} and start >= ${from} and start < ${to} order by start`;
  return rows.map((r) => ({ start: r.start, ...countsOf(r) }));
}

/** Sums of the minutes since `since` per cache, for these caches (absent: no traffic). */
export async function trafficTotalsSince(sql: ISql, cacheIds: readonly string[], since: Date): Promise<Map<string, TrafficCounts>> {
  if (cacheIds.length === 0) return new Map();
  const rows = await sql<(CountColumns & { cache_id: string })[]>`
    select cache_id, sum(narinfo_hits) as narinfo_hits, sum(narinfo_misses) as narinfo_misses,
           sum(upstream_hits) as upstream_hits, sum(nar_bytes_served) as nar_bytes_served
    from cache_traffic_minutes where cache_id = any(${sql.array([...cacheIds])}::uuid[]) and minute >= ${since}
    group by cache_id`;
  return new Map(rows.map((r) => [r.cache_id, countsOf(r)]));
}

/** Stored paths and (compressed) bytes of these caches. */
export async function storedTotalsOf(sql: ISql, cacheIds: readonly string[]): Promise<Map<string, { paths: number; bytes: number }>> {
  if (cacheIds.length === 0) return new Map();
  const rows = await sql<{ cache_id: string; paths: number; bytes: string }[]>`
    select s.cache_id, count(*)::int as paths, coalesce(sum(p.file_size), 0) as bytes
    from path_signatures s join cached_paths p on p.id = s.cached_path_id
    where s.cache_id = any(${sql.array([...cacheIds])}::uuid[]) group by s.cache_id`;
  return new Map(rows.map((r) => [r.cache_id, { paths: r.paths, bytes: Number(r.bytes) }]));
}
