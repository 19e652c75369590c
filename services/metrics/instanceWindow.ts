// The instance-wide window (docs/metrics.md, "Stored metrics: the instance window"): every
// metrics.instanceIntervalSecs a server process writes one row of the whole instance's state into
// instance_samples: workers connected (to any process) with their slots and running jobs, queued
// and running builds, queued and open evaluations. Every value is read from PostgreSQL, so every
// process would write the same row: the row's time is the start of its interval and the first
// writer wins. The same pass deletes rows past metrics.retention.rawDays. Superusers read it with
// GET /metrics/instance.
import type { MetricsWindowQuery } from '../../protocol/index.js';
import { deleteInSlices, retentionCutoff, type Sql } from '../../storage/index.js';
import type { Clock } from '../../supervisors/index.js';
import type { Principal } from '../access/index.js';
import { metricsWindow } from './workerSampleSeries.js';
import { demandSuperuser } from './superuserOnly.js';

const HOUR_MS = 3_600_000;
const MAX_POINTS = 5000;

interface InstanceRow {
  sampled_at: Date;
  workers_connected: number;
  build_slots: number;
  builds_running: number;
  eval_slots: number;
  evals_running: number;
  builds_queued: number;
  evaluations_queued: number;
  evaluations_open: number;
}

/** One pass: the row of the interval `now` falls in (if no process wrote it yet), then retention. */
export async function sampleInstance(sql: Sql, intervalSecs: number, rawDays: number, now: Date): Promise<{ sampled: number; deleted: number }> {
  const at = new Date(Math.floor(now.getTime() / (intervalSecs * 1000)) * intervalSecs * 1000);
  const written = await sql`
    insert into instance_samples (sampled_at, workers_connected, build_slots, builds_running, eval_slots, evals_running, builds_queued, evaluations_queued, evaluations_open)
    select ${at}, w.connected, w.build_slots, (select count(*)::int from derivation_builds where status = 'started'), w.eval_slots,
           (select count(*)::int from evaluations where phase in ('fetching', 'evaluating')),
           (select count(*)::int from derivation_builds where status = 'queued'),
           (select count(*)::int from evaluations where phase = 'queued'),
           (select count(*)::int from evaluations where phase not in ('completed', 'failed', 'aborted'))
    -- Slots are what workers claim: summed as bigint and capped, so no claim can make the pass fail.
    from (select count(*)::int as connected, least(coalesce(sum((hello->>'maxConcurrentBuilds')::bigint), 0), 2147483647)::int as build_slots,
                 least(coalesce(sum((hello->>'maxConcurrentEvals')::bigint), 0), 2147483647)::int as eval_slots
          from worker_connections where disconnected_at is null) w
    on conflict (sampled_at) do nothing returning 1`;
  const before = retentionCutoff(rawDays, now);
  const deleted = before === null ? 0 : await deleteInSlices(async (limit) => (await sql`
    delete from instance_samples where ctid in (select ctid from instance_samples where sampled_at < ${before} limit ${limit}) returning 1`).length);
  return { sampled: written.length, deleted };
}

export function instanceWindowService({ sql, clock }: { sql: Sql; clock: Clock }) {
  return {
    /** GET /metrics/instance: superusers only. */
    async series(who: Principal, query: MetricsWindowQuery) {
      demandSuperuser(who, 'the instance window');
      const { from, to } = metricsWindow(query, clock.now(), 24 * HOUR_MS, 31 * 24 * HOUR_MS);
      const rows = await sql<InstanceRow[]>`
        select * from instance_samples where sampled_at >= ${from} and sampled_at < ${to} order by sampled_at limit ${MAX_POINTS + 1}`;
      return {
        from: from.toISOString(), to: to.toISOString(), truncated: rows.length > MAX_POINTS,
        samples: rows.slice(0, MAX_POINTS).map((r) => ({ ...r, sampled_at: r.sampled_at.toISOString() })),
      };
    },
  };
}
export type InstanceWindowService = ReturnType<typeof instanceWindowService>;
