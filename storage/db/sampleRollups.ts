// Rollups of the raw worker samples and instance window rows (0054_sample_rollups.sql,
// docs/metrics.md "Stored metrics: worker and instance rollups"): one row per source, worker,
// connection, measured value, period and start with the count, sum, least and largest of the
// value; their retention; the read behind GET /metrics/instance/rollups and
// GET /workers/{worker}/rollups.
import type { Queryable as ISql } from './queryable.js';
import { deleteInSlices } from './sliceDeletes.js';
import type { PhasePeriod } from './phaseSamples.js';
import { KEEP_ALL, recomputeFrom, type RetentionCutoffs } from './rollupEdge.js';

export type SampleSource = 'worker' | 'instance';

/** "No worker" (the instance's rows) and "no connection" (worker samples from before 0045). */
export const NO_ID = '00000000-0000-0000-0000-000000000000';

/** The values rolled up, as named in the raw tables and in the answers. */
export const WORKER_METRICS = ['load1', 'memory_free_bytes', 'memory_total_bytes', 'store_free_bytes', 'build_slots', 'builds_running', 'eval_slots', 'evals_running'] as const;
export const INSTANCE_METRICS = ['workers_connected', 'build_slots', 'builds_running', 'eval_slots', 'evals_running', 'builds_queued', 'evaluations_queued', 'evaluations_open'] as const;

export interface SampleRollupPoint {
  start: Date;
  metric: string;
  samples: number;
  total: number;
  least: number;
  greatest: number;
}

/** As the phase rollups: raw rows may arrive a few intervals late, so minutes look back 15 of them. */
const LOOKBACK: Record<PhasePeriod, string> = { minute: '15 minutes', hour: '1 hour', day: '1 day', week: '1 week' };

const UPSERT = 'on conflict (source, worker_id, connection_id, metric, period, start) do update set samples = excluded.samples, total = excluded.total, least_value = excluded.least_value, greatest_value = excluded.greatest_value';

/** `values (...)` pairs that unpivot a raw row's columns into (metric, value); nulls are skipped later. */
const unpivot = (alias: string, metrics: readonly string[]) => metrics.map((m) => `('${m}', ${alias}.${m}::numeric)`).join(', ');

/**
 * One rollup pass of both sources: minutes from the raw rows, then hours, days and weeks, each
 * recomputed (set, never added to) from its lookback before the source's latest rollup of that
 * level on, so repeated passes or passes of several processes count nothing twice.
 */
export async function rollUpSamples(sql: ISql, cutoffs: RetentionCutoffs = KEEP_ALL): Promise<void> {
  const latest = (source: SampleSource, period: PhasePeriod) =>
    `coalesce((select max(start) - interval '${LOOKBACK[period]}' from sample_rollups where source = '${source}' and period = '${period}'), '-infinity')`;
  // Only periods whose rows below are all still kept (storage/db/rollupEdge.ts); an ISO instant is a safe literal.
  const whole = (period: PhasePeriod, column: string, cutoff: Date | null) => {
    const from = recomputeFrom(cutoff);
    return from === null ? '' : `and date_trunc('${period}', ${column}, 'UTC') >= '${from.toISOString()}'::timestamptz`;
  };
  await sql.unsafe(`
    insert into sample_rollups (source, worker_id, connection_id, metric, period, start, samples, total, least_value, greatest_value)
    select 'worker', s.worker_id, coalesce(s.connection_id, '${NO_ID}'), m.metric, 'minute', date_trunc('minute', s.sampled_at, 'UTC'),
           count(*), sum(m.value), min(m.value), max(m.value)
    from worker_samples s cross join lateral (values ${unpivot('s', WORKER_METRICS)}) as m (metric, value)
    where s.sampled_at >= ${latest('worker', 'minute')} ${whole('minute', 's.sampled_at', cutoffs.raw)} and m.value is not null
    group by 2, 3, 4, 6 ${UPSERT}`);
  await sql.unsafe(`
    insert into sample_rollups (source, worker_id, connection_id, metric, period, start, samples, total, least_value, greatest_value)
    select 'instance', '${NO_ID}', '${NO_ID}', m.metric, 'minute', date_trunc('minute', s.sampled_at, 'UTC'), count(*), sum(m.value), min(m.value), max(m.value)
    from instance_samples s cross join lateral (values ${unpivot('s', INSTANCE_METRICS)}) as m (metric, value)
    where s.sampled_at >= ${latest('instance', 'minute')} ${whole('minute', 's.sampled_at', cutoffs.raw)}
    group by 4, 6 ${UPSERT}`);
  for (const source of ['worker', 'instance'] as const) {
    for (const [period, below] of [['hour', 'minute'], ['day', 'hour'], ['week', 'day']] as const) {
      await sql.unsafe(`
        insert into sample_rollups (source, worker_id, connection_id, metric, period, start, samples, total, least_value, greatest_value)
        select source, worker_id, connection_id, metric, '${period}', date_trunc('${period}', start, 'UTC'), sum(samples), sum(total), min(least_value), max(greatest_value)
        from sample_rollups where source = '${source}' and period = '${below}' and start >= ${latest(source, period)} ${whole(period, 'start', below === 'day' ? null : cutoffs.rollups)}
        group by 1, 2, 3, 4, 6 ${UPSERT}`);
    }
  }
}

/** Deletes minute and hour rollups before `before`; how many rows. */
export async function pruneSampleRollups(sql: ISql, before: Date): Promise<number> {
  return deleteInSlices(async (limit) => (await sql`
    delete from sample_rollups where ctid in (
      select ctid from sample_rollups where period in ('minute', 'hour') and start < ${before} limit ${limit})`).count);
}

/**
 * The points of one source and period with from <= start < to, oldest first, then by metric; a
 * worker's summed over its connections in `connections` (null: every connection).
 */
export async function sampleRollupSeries(
  sql: ISql, query: { source: SampleSource; workerId: string; connections: readonly string[] | null; period: PhasePeriod; from: Date; to: Date; limit: number },
): Promise<SampleRollupPoint[]> {
  const { source, workerId, connections, period, from, to, limit } = query;
  const rows = await sql<{ start: Date; metric: string; samples: string; total: string; least: string; greatest: string }[]>`
    select start, metric, sum(samples) as samples, sum(total) as total, min(least_value) as least, max(greatest_value) as greatest
    from sample_rollups
    where source = ${source} and worker_id = ${workerId} and period = ${period} and start >= ${from} and start < ${to}
      ${connections === null ? sql`` : sql`and connection_id = any(${sql.array([...connections])}::uuid[])`}
    group by start, metric order by start, metric limit ${limit}`;
  return rows.map((r) => ({ start: r.start, metric: r.metric, samples: Number(r.samples), total: Number(r.total), least: Number(r.least), greatest: Number(r.greatest) }));
}
