// The scheduler's reads and bulk writes (docs/builds.md, "Scheduler rules").
import type { Sql } from 'postgres';
import { leaseHeldCondition, type Events } from '../../storage/index.js';
import { recordSpentAttempt } from './attemptScopes.js';
import { applyStatusChanges } from './buildStatus.js';
import { applyPhaseChanges } from './evaluationPhases.js';
import type { ReadyBuild } from './readyBuild.js';
import { offeredTo } from './tenantScope.js';

export interface QueuedEvaluation {
  id: string;
  repository: string;
  /** null for an evaluation of a source upload */
  commit: string | null;
  wildcard: string;
  project_id: string;
  attempts: number;
  /** the upload evaluated instead of a commit (null once swept); source_sha256 says it was one */
  source_upload_id: string | null;
  source_sha256: string | null;
  /** when it last entered queued (migration 0051): its dispatch latency starts there */
  queued_at: Date;
}

export const queuedEvaluations = (sql: Sql, phase: 'queued' | 'waiting') => sql<QueuedEvaluation[]>`
  select e.id, e.repository, e.commit, e.wildcard, t.project_id, e.attempts, e.source_upload_id, e.source_sha256, e.queued_at
  from evaluations e join tasks t on t.id = e.task_id
  where e.phase = ${phase} and (e.commit is not null or e.source_sha256 is not null) and not e.awaiting_approval order by e.created_at limit 200`;

export type { ReadiedBuild, ReadyBuild } from './readyBuild.js';

/**
 * Queued builds of evaluations that are building, whose inputs are all built or substituted (the
 * readiness counter, migration 0042, through its partial index) and whose retry backoff has passed
 * at `now` (the scheduler's clock, which wrote not_before), oldest first; or only those of `ids`.
 * `projects` are those the build is offered for: the projects of organizations its outcome on a
 * worker only some organizations trust does not stand for (tenantScope.ts offeredTo; buildStatus.ts's
 * readiness statement says the same). A build no project is left to offer to (queued again for
 * other tenants, who left) is not returned: the restore pass finds those (tenantScope.ts
 * requeuedForOthers), so the ready queue never reads them again and again. The projects are
 * gathered per build (lateral) rather than grouped over the whole join: the partial index's order
 * then streams into the limit, whatever PostgreSQL's statistics say. Grouped, with the statistics
 * of a 50,000-build graph just analyzed, it joined every build of the graph first: 176 ms a read.
 * `after`: only the builds after that one in the order (queued_at, id), a page past a window whose
 * builds cannot be placed (readyQueue.ts); if that build is gone, none (the queue then reads the front).
 */
export const readyBuilds = (sql: Sql, limit: number, now: Date, ids?: readonly string[], after?: string | null) => sql<ReadyBuild[]>`
  select db.id, d.drv_path, d.name, d.system, d.required_features, d.outputs, d.timeout_secs, d.max_silent_secs, db.attempts,
         d.prefer_local_build, db.substitute_misses, wanted.projects, db.queued_at, wanted.task_timeouts, wanted.task_max_silents
  from derivation_builds db join derivations d on d.id = db.derivation_id
  cross join lateral (
    select array_agg(distinct p.id) as projects,
           array_agg(distinct coalesce(t.build_timeout_secs, -1)) as task_timeouts,
           array_agg(distinct coalesce(t.build_max_silent_secs, -1)) as task_max_silents
    from builds b join evaluations e on e.id = b.evaluation_id and e.phase = 'building'
    join tasks t on t.id = e.task_id join projects p on p.id = t.project_id and ${offeredTo(sql)}
    where b.derivation_build_id = db.id) wanted
  where db.status = 'queued' and db.ready and (db.not_before is null or db.not_before <= ${now})
    and wanted.projects is not null
    ${ids === undefined ? sql`` : sql`and db.id = any(${ids as string[]}::uuid[])`}
    ${after ? sql`and db.queued_at >= (select x.queued_at from derivation_builds x where x.id = ${after})
      and (db.queued_at, db.id) > (select x.queued_at, x.id from derivation_builds x where x.id = ${after})` : sql``}
  order by db.queued_at, db.id limit ${limit}`;

/**
 * Queued builds that depend, directly or not, on this one; with `failedFor` (a failure that stands
 * for these organizations only, tenantScope.ts) those no building evaluation of another
 * organization wants.
 */
export const queuedDependents = (sql: Sql, derivationBuildId: string, failedFor: readonly string[] | null = null) => sql<{ id: string }[]>`
  with recursive dependents(derivation_id) as (
    select x.derivation_id from derivation_edges x join derivation_builds db on db.derivation_id = x.depends_on where db.id = ${derivationBuildId}
    union
    select x.derivation_id from derivation_edges x join dependents d on x.depends_on = d.derivation_id)
  select db.id from derivation_builds db join dependents d on d.derivation_id = db.derivation_id where db.status = 'queued'
    ${failedFor === null ? sql`` : sql`and not exists (
      select 1 from builds wb join evaluations ev on ev.id = wb.evaluation_id and ev.phase = 'building'
      join tasks wt on wt.id = ev.task_id join projects wp on wp.id = wt.project_id
      where wb.derivation_build_id = db.id and not (wp.organization_id = any(${failedFor as string[]}::uuid[])))`}`;

/**
 * Building evaluations, among those that use these builds, none of whose builds is still open. It
 * runs after every completion batch. Asked as a plain anti-join, PostgreSQL walked the evaluation's
 * builds in the heap's order, completed ones first, one lookup each (the statistics of a graph just
 * recorded say ~50 builds an evaluation): 12-85 ms a call at 10,000 builds, growing with the graph.
 * The ordered subquery is planned on its own, as a hash join of the evaluation's builds with the
 * open ones (the derivation_builds_open partial index): 8-10× less (bench/README.md, dispatch).
 */
export const finishedEvaluations = (sql: Sql, opts: { derivationBuilds?: string[]; evaluation?: string }) => sql<{ id: string }[]>`
  select e.id from evaluations e
  where e.phase = 'building'
    and (${opts.evaluation ?? null}::uuid is null or e.id = ${opts.evaluation ?? null})
    and (${opts.derivationBuilds ?? null}::uuid[] is null
         or e.id in (select b.evaluation_id from unnest(${opts.derivationBuilds ?? null}::uuid[]) as x(id) join builds b on b.derivation_build_id = x.id))
    and not exists (
      select 1 from (select b.derivation_build_id from builds b where b.evaluation_id = e.id order by b.derivation_build_id) b
      join derivation_builds db on db.id = b.derivation_build_id
      where db.status in ('queued', 'started'))`;

/**
 * Jobs whose worker has no open connection on a live server process (services/workers/serverInstance.ts)
 * go back to the queue, through the lifecycles and with their events: the process that dispatched
 * them died. Returns how many.
 */
export async function requeueOrphanedJobs(events: Events): Promise<number> {
  return events.transaction(async (tx, emit) => {
    const live = tx`
      select wc.worker_id from worker_connections wc
      join server_instances si on si.id = wc.server_instance_id
      where wc.disconnected_at is null and ${leaseHeldCondition(tx, tx`si.lock_key`)}`;
    const builds = await tx<{ id: string }[]>`
      select id from derivation_builds where status = 'started' and (worker_id is null or worker_id not in (${live}))`;
    const evaluations = await tx<{ id: string }[]>`
      select id from evaluations where phase in ('evaluating', 'fetching') and (worker_id is null or worker_id not in (${live}))`;
    // attempts spent on no worker in particular (the server process died): every organization's (attemptScopes.ts)
    await recordSpentAttempt(tx, builds.map((b) => b.id), null, true);
    const requeuedBuilds = await applyStatusChanges(tx, emit, builds.map((b) => b.id), { event: { type: 'requeue', why: 'orphaned' }, workerId: null });
    const requeuedEvaluations = await applyPhaseChanges(tx, emit, evaluations.map((e) => e.id), { event: { type: 'requeue', why: 'orphaned' }, workerId: null });
    return requeuedBuilds.length + requeuedEvaluations.length;
  });
}
