// Stored job phase timings (0051_phase_samples.sql, docs/metrics.md "Stored metrics: job phases"):
// raw samples added in batches by every server process, their minute/hour/day/week rollups, their
// retention, and the read behind GET /metrics/phases.
import type { Queryable as ISql } from './queryable.js';
import { KEEP_ALL, recomputeFrom, type RetentionCutoffs } from './rollupEdge.js';
import { deleteInSlices } from './sliceDeletes.js';

export type PhaseKind = 'evaluation' | 'build';
/** dispatch: from becoming dispatchable to a worker taking the job; run: the job on the worker */
export type PhaseName = 'dispatch' | 'run';
export type PhasePeriod = 'minute' | 'hour' | 'day' | 'week';

export interface PhaseSample {
  kind: PhaseKind;
  phase: PhaseName;
  endedAt: Date;
  /** the samples' total */
  durationMs: number;
  /** how many samples the row sums (PhaseSampleBuffer sums a second's); 1 when absent */
  samples?: number;
  /** the longest of them; durationMs when absent */
  maxMs?: number;
}

export interface PhasePoint {
  kind: PhaseKind;
  phase: PhaseName;
  start: Date;
  samples: number;
  totalMs: number;
  maxMs: number;
}

/**
 * How far back each level is recomputed from its latest rollup: a flush of raw samples may come a
 * few flush intervals late (a failed flush keeps its samples for the next), so minutes look back
 * 15 of them; the levels above look back one period, as the cache traffic's do.
 */
const LOOKBACK: Record<PhasePeriod, string> = { minute: '15 minutes', hour: '1 hour', day: '1 day', week: '1 week' };

export async function addPhaseSamples(sql: ISql, rows: readonly PhaseSample[]): Promise<void> {
  if (rows.length === 0) return;
  const json = rows.map((r) => ({
    kind: r.kind, phase: r.phase, ended_at: r.endedAt.toISOString(), duration_ms: Math.max(0, Math.round(r.durationMs)),
    samples: Math.max(1, Math.round(r.samples ?? 1)), max_ms: Math.max(0, Math.round(r.maxMs ?? r.durationMs)),
  }));
  await sql`
    insert into phase_samples (kind, phase, ended_at, duration_ms, samples, max_ms)
    select kind, phase, ended_at, duration_ms, samples, max_ms
    from jsonb_to_recordset(${sql.json(json)}::jsonb) as u (kind text, phase text, ended_at timestamptz, duration_ms bigint, samples integer, max_ms bigint)`;
}

/**
 * One rollup pass: minutes from the raw samples, hours from minutes, days from hours, weeks from
 * days. Each level is recomputed (set, never added to) from its lookback before its latest rollup
 * on, so passes of several processes, or repeated ones, count nothing twice; older rollups are
 * left alone, so pruning the level below never changes them.
 */
export async function rollUpPhases(sql: ISql, cutoffs: RetentionCutoffs = KEEP_ALL): Promise<void> {
  const latest = (period: PhasePeriod) => sql`coalesce((select max(start) - ${LOOKBACK[period]}::interval from phase_rollups where period = ${period}), '-infinity')`;
  // Only periods whose rows below are all still kept (storage/db/rollupEdge.ts).
  const whole = (period: PhasePeriod, column: 'ended_at' | 'start', cutoff: Date | null) => {
    const from = recomputeFrom(cutoff);
    return from === null ? sql`` : sql`and date_trunc(${period}, ${sql(column)}, 'UTC') >= ${from}`;
  };
  await sql`
    insert into phase_rollups (kind, phase, period, start, samples, total_ms, max_ms)
    select kind, phase, 'minute', date_trunc('minute', ended_at, 'UTC'), sum(samples), sum(duration_ms), max(coalesce(max_ms, duration_ms))
    from phase_samples where ended_at >= ${latest('minute')} ${whole('minute', 'ended_at', cutoffs.raw)}
    group by 1, 2, 4
    on conflict (kind, phase, period, start) do update set samples = excluded.samples, total_ms = excluded.total_ms, max_ms = excluded.max_ms`;
  for (const [period, below] of [['hour', 'minute'], ['day', 'hour'], ['week', 'day']] as const) {
    await sql`
      insert into phase_rollups (kind, phase, period, start, samples, total_ms, max_ms)
      select kind, phase, ${period}, date_trunc(${period}, start, 'UTC'), sum(samples), sum(total_ms), max(max_ms)
      from phase_rollups where period = ${below} and start >= ${latest(period)} ${whole(period, 'start', below === 'day' ? null : cutoffs.rollups)}
      group by 1, 2, 4
      on conflict (kind, phase, period, start) do update set samples = excluded.samples, total_ms = excluded.total_ms, max_ms = excluded.max_ms`;
  }
}

/** Deletes raw samples before `rawBefore` and minute and hour rollups before `rollupBefore` (null keeps them); how many rows. */
export async function prunePhases(sql: ISql, cutoffs: { rawBefore: Date | null; rollupBefore: Date | null }): Promise<number> {
  let deleted = 0;
  const { rawBefore, rollupBefore } = cutoffs;
  if (rawBefore !== null) {
    deleted += await deleteInSlices(async (limit) => (await sql`
      delete from phase_samples where ctid in (select ctid from phase_samples where ended_at < ${rawBefore} limit ${limit})`).count);
  }
  if (rollupBefore !== null) {
    deleted += await deleteInSlices(async (limit) => (await sql`
      delete from phase_rollups where ctid in (
        select ctid from phase_rollups where period in ('minute', 'hour') and start < ${rollupBefore} limit ${limit})`).count);
  }
  return deleted;
}

/** The points of one period with from <= start < to, oldest first, then by kind and phase. */
export async function phaseSeries(sql: ISql, period: PhasePeriod, from: Date, to: Date, limit: number): Promise<PhasePoint[]> {
  const rows = await sql<{ kind: PhaseKind; phase: PhaseName; start: Date; samples: string; total_ms: string; max_ms: string }[]>`
    select kind, phase, start, samples, total_ms, max_ms from phase_rollups
    where period = ${period} and start >= ${from} and start < ${to} order by start, kind, phase limit ${limit}`;
  return rows.map((r) => ({ kind: r.kind, phase: r.phase, start: r.start, samples: Number(r.samples), totalMs: Number(r.total_ms), maxMs: Number(r.max_ms) }));
}
