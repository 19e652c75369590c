// GET /projects/{org}/{project}/metrics (docs/metrics.md, "Stored metrics: a project's series"): a
// project's evaluations and build times per hour or day, read from the evaluation and build records
// themselves (kept retentionDays), for whoever may see the project (viewProject; 404 otherwise).
// Evaluations are counted in the period they were created, by how they ended; builds in the period
// they finished, each derivation build once however many of the project's evaluations share it.
import type { ProjectMetricsQuery } from '../../protocol/index.js';
import type { Sql } from '../../storage/index.js';
import type { Clock } from '../../supervisors/index.js';
import { demandProject, type Principal } from '../access/index.js';
import { statusFor } from '../builds/index.js';
import { metricsWindow } from './workerSampleSeries.js';

const PERIOD_MS = { hour: 3_600_000, day: 86_400_000 } as const;
/** Without `from`: two days of hours or sixty days. */
const DEFAULT_POINTS = { hour: 48, day: 60 } as const;
/** At most this many periods per answer. */
const MAX_POINTS = 1500;

interface EvaluationBucket {
  start: Date;
  created: number;
  completed: number;
  failed: number;
  aborted: number;
  eval_seconds_avg: number | null;
}

interface BuildBucket {
  start: Date;
  completed: number;
  failed: number;
  build_seconds_avg: number | null;
  build_seconds_max: number | null;
}

export function projectSeriesService({ sql, clock }: { sql: Sql; clock: Clock }) {
  return {
    async series(who: Principal, org: string, project: string, query: ProjectMetricsQuery) {
      const { row } = await demandProject(sql, who, org, project, 'viewProject');
      const period = query.period ?? 'hour';
      const { from, to } = metricsWindow(query, clock.now(), DEFAULT_POINTS[period] * PERIOD_MS[period], MAX_POINTS * PERIOD_MS[period]);
      // the builds as the project's organization sees them (docs/builds.md, "Whose failure")
      const status = statusFor(sql, sql`${row.organization_id}::uuid`);
      const [evaluations, builds] = await Promise.all([
        sql<EvaluationBucket[]>`
          select date_trunc(${period}, e.created_at, 'UTC') as start, count(*)::int as created,
                 count(*) filter (where e.phase = 'completed')::int as completed, count(*) filter (where e.phase = 'failed')::int as failed,
                 count(*) filter (where e.phase = 'aborted')::int as aborted, (avg(e.eval_duration_ms) / 1000)::float8 as eval_seconds_avg
          from evaluations e join tasks t on t.id = e.task_id
          where t.project_id = ${row.id} and e.created_at >= ${from} and e.created_at < ${to}
          group by 1 order by 1`,
        sql<BuildBucket[]>`
          select date_trunc(${period}, db.finished_at, 'UTC') as start,
                 count(*) filter (where ${status} = 'completed')::int as completed, count(*) filter (where ${status} = 'failed')::int as failed,
                 (avg(extract(epoch from db.finished_at - db.started_at)) filter (where db.started_at is not null))::float8 as build_seconds_avg,
                 (max(extract(epoch from db.finished_at - db.started_at)) filter (where db.started_at is not null))::float8 as build_seconds_max
          from derivation_builds db
          -- From the project's own evaluations (indexed by task and by evaluation), each shared build
          -- once: never a scan of every build on the instance, which any viewer of a public project
          -- could ask for.
          join (select distinct b.derivation_build_id as id from tasks t
                join evaluations e on e.task_id = t.id and e.created_at < ${to}
                join builds b on b.evaluation_id = e.id
                where t.project_id = ${row.id}) p on p.id = db.id
          where db.finished_at >= ${from} and db.finished_at < ${to} and db.status in ('completed', 'failed')
          group by 1 order by 1`,
      ]);
      const round = (n: number | null) => (n === null ? null : +n.toFixed(3));
      return {
        project: `${row.organization}/${row.name}`, period, from: from.toISOString(), to: to.toISOString(),
        evaluations: evaluations.map((b) => ({ ...b, start: b.start.toISOString(), eval_seconds_avg: round(b.eval_seconds_avg) })),
        builds: builds.map((b) => ({ ...b, start: b.start.toISOString(), build_seconds_avg: round(b.build_seconds_avg), build_seconds_max: round(b.build_seconds_max) })),
      };
    },
  };
}
export type ProjectSeriesService = ReturnType<typeof projectSeriesService>;
