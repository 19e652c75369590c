// GET /workers/{worker}/samples (docs/metrics.md, "Stored metrics: worker samples"): a worker's
// stored samples over a window. Who may read them: a superuser, every sample; anyone else, the
// samples taken while the worker was connected for a project where they hold manageWorkers (the
// projects whose peer tokens it presented, kept on its connection). A worker id is claimed by the
// worker, not proven, so a project that registered someone else's worker id, or a worker posing as
// another, sees only samples of its own connections. Nobody's project in sight: 404, as if the
// worker did not exist; a project in sight without manageWorkers: 403 naming it.
import { ApiError, type MetricsWindowQuery } from '../../protocol/index.js';
import type { Sql } from '../../storage/index.js';
import type { Clock } from '../../supervisors/index.js';
import { accessOf, findProjectById, forbidden, isSuperuser, isUuid, notFound, projectTarget, type Principal } from '../access/index.js';

const HOUR_MS = 3_600_000;
/** Without `from`: the last day. */
const DEFAULT_WINDOW_MS = 24 * HOUR_MS;
/** At most a week per answer (40,320 samples at the default 15 s interval, fewer with the cap below). */
const MAX_WINDOW_MS = 7 * 24 * HOUR_MS;
/** At most this many samples per answer, oldest first; `truncated` says there were more. */
const WORKER_SAMPLES_MAX = 5000;

interface SampleRow {
  sampled_at: Date;
  load1: number;
  memory_free_bytes: string;
  memory_total_bytes: string;
  store_free_bytes: string | null;
  build_slots: number;
  builds_running: number;
  eval_slots: number;
  evals_running: number;
}

/** A window from the query: `to` defaults to now, `from` to `defaultMs` before it; longer than `maxMs` is refused. */
export function metricsWindow(query: MetricsWindowQuery, now: Date, defaultMs: number, maxMs: number): { from: Date; to: Date } {
  const to = query.to === undefined ? now : new Date(query.to);
  const from = query.from === undefined ? new Date(to.getTime() - defaultMs) : new Date(query.from);
  if (from.getTime() >= to.getTime()) throw new ApiError('invalid_query', 'from: must be before to');
  if (to.getTime() - from.getTime() > maxMs) throw new ApiError('invalid_query', `from: at most ${maxMs / HOUR_MS} hours before to`);
  return { from, to };
}

/** The projects the caller may read this worker's samples for; null: every sample (a superuser). */
export async function readableProjects(sql: Sql, who: Principal, workerId: string): Promise<string[] | null> {
  if (isSuperuser(who)) return null;
  const label = `worker ${workerId}`;
  if (!isUuid(workerId)) throw notFound(label);
  const candidates = await sql<{ project_id: string }[]>`
    select distinct unnest(projects) as project_id from worker_connections where worker_id = ${workerId}`;
  const readable: string[] = [];
  let seen = false;
  for (const { project_id } of candidates) {
    const row = await findProjectById(sql, who, project_id);
    if (row === null) continue;
    const access = accessOf(who, projectTarget(row));
    seen ||= access.visible;
    if (access.visible && access.permissions.has('manageWorkers')) readable.push(row.id);
  }
  if (readable.length > 0) return readable;
  if (seen) throw forbidden('manageWorkers', `a project ${label} works for`);
  throw notFound(label);
}

export function workerSampleSeriesService({ sql, clock }: { sql: Sql; clock: Clock }) {
  return {
    async series(who: Principal, workerId: string, query: MetricsWindowQuery) {
      const projects = await readableProjects(sql, who, workerId);
      if (!isUuid(workerId)) throw notFound(`worker ${workerId}`);
      const { from, to } = metricsWindow(query, clock.now(), DEFAULT_WINDOW_MS, MAX_WINDOW_MS);
      const rows = await sql<SampleRow[]>`
        select s.sampled_at, s.load1, s.memory_free_bytes, s.memory_total_bytes, s.store_free_bytes, s.build_slots, s.builds_running, s.eval_slots, s.evals_running
        from worker_samples s
        where s.worker_id = ${workerId} and s.sampled_at >= ${from} and s.sampled_at < ${to}
          ${projects === null ? sql`` : sql`and exists (select 1 from worker_connections c where c.id = s.connection_id and c.projects && ${projects}::uuid[])`}
        order by s.sampled_at limit ${WORKER_SAMPLES_MAX + 1}`;
      return {
        worker: workerId, from: from.toISOString(), to: to.toISOString(), truncated: rows.length > WORKER_SAMPLES_MAX,
        samples: rows.slice(0, WORKER_SAMPLES_MAX).map((r) => ({
          sampled_at: r.sampled_at.toISOString(), load1: r.load1, memory_free_bytes: Number(r.memory_free_bytes), memory_total_bytes: Number(r.memory_total_bytes),
          store_free_bytes: r.store_free_bytes === null ? null : Number(r.store_free_bytes),
          build_slots: r.build_slots, builds_running: r.builds_running, eval_slots: r.eval_slots, evals_running: r.evals_running,
        })),
      };
    },
  };
}
export type WorkerSampleSeriesService = ReturnType<typeof workerSampleSeriesService>;
