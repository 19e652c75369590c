// Whose completion, whose failure (docs/builds.md, "Build servers: whose completion"): a
// derivation_build is one record for every tenant, but what a worker only some organizations trust
// did (an organization's build server, a worker registered per project) stands for those
// organizations alone: its output lives in their caches, and the worker (unverified, perhaps
// hostile, perhaps returning anything) is trusted by no one else. derivation_builds.worker_scope
// (migration 0073, written at dispatch) holds the organizations the worker of the current attempt
// builds for; done_for (0072) and failed_for (0073) the organizations a completion or a final
// failure stands for (null: every tenant). These are the statements that keep other tenants from
// taking such an outcome as theirs.
import type { TransactionSql } from 'postgres';
import type { BuildEvent } from '../../actors/index.js';
import type { Queryable } from '../../storage/index.js';

/**
 * The `done_for` a status change writes (over derivation_builds b): a completion adds the scope of
 * the worker that took the attempt (written at dispatch: a server deleted meanwhile changes
 * nothing), or stands for everyone when kiln's own worker built it; a substitution (the wanting
 * projects' caches hold it) and an eviction reset it; every other change keeps it (a re-queue for
 * another tenant above all).
 */
export function doneForUpdate(sql: Queryable, event: BuildEvent) {
  if (event.type === 'succeed') return sql`kiln_completion_scope(b.done_for, b.worker_scope)`;
  if (event.type === 'substitute' || (event.type === 'requeue' && event.why === 'evicted')) return sql`null::uuid[]`;
  return sql`b.done_for`;
}

/**
 * The `failed_for` a status change writes: a final failure of a started attempt adds the worker's
 * scope (kiln's own worker's failure stands for everyone); kiln's own worker's completion, a
 * substitution, an eviction and a restart forget it; the rest keep it. A dependency failure's scope
 * is written by BuildOutcomes.failDependents, from its input's.
 */
export function failedForUpdate(sql: Queryable, event: BuildEvent, to: string) {
  if (event.type === 'fail' && to === 'failed') {
    return sql`case when b.status <> 'started' then b.failed_for else kiln_completion_scope(b.failed_for, b.worker_scope) end`;
  }
  if (event.type === 'succeed') return sql`case when b.worker_scope is null then null else b.failed_for end`;
  if (event.type === 'substitute' || (event.type === 'requeue' && (event.why === 'evicted' || event.why === 'restarted'))) return sql`null::uuid[]`;
  return sql`b.failed_for`;
}

/**
 * The `worker_scope` a dispatch writes: the organizations of the projects the worker serves, or
 * null for an open-mode worker (kiln's own). `projects` is a uuid[] expression; other changes keep it.
 */
export function workerScopeUpdate(sql: Queryable, event: BuildEvent, projects: ReturnType<Queryable>) {
  return event.type === 'dispatch' ? sql`kiln_projects_scope(${projects})` : sql`b.worker_scope`;
}

/**
 * Whether the project p may be offered the build db (the ready queries' join condition): not when
 * its organization already has the build's outcome (done_for, failed_for). A build queued again
 * for other tenants is thereby offered, substituted and pushed for theirs only.
 */
export const offeredTo = (sql: Queryable) =>
  sql`((db.done_for is null and db.failed_for is null) or not (p.organization_id = any(coalesce(db.done_for, '{}') || coalesce(db.failed_for, '{}'))))`;

/** A building evaluation (ev) of an organization outside `organizations` (a uuid[] over db) wants the build db. */
const wantedOutside = (sql: Queryable, organizations: ReturnType<Queryable>) => sql`
  exists (
    select 1 from builds wb join evaluations ev on ev.id = wb.evaluation_id and ev.phase = 'building'
    join tasks wt on wt.id = ev.task_id join projects wp on wp.id = wt.project_id
    where wb.derivation_build_id = db.id and not (wp.organization_id = any(${organizations})))`;

/** A building evaluation of an organization the build's (db) outcome does not stand for wants it. */
const wantedByAnother = (sql: Queryable) => wantedOutside(sql, sql`coalesce(db.done_for, '{}') || coalesce(db.failed_for, '{}')`);

/**
 * Of these builds just completed or failed on a worker only some organizations trust, those a
 * building evaluation of another organization also wants: they go back to the queue for it
 * (requeue other_tenant), in the outcome's transaction, so the completion's readiness moves cancel
 * out and no dependent of the other tenant is ever made ready on an output it cannot read (nor
 * failed on a failure that is not its own). Only building evaluations count: one still evaluating
 * queues it for itself when it starts building (claimForEvaluation), so it never holds the build.
 */
export async function wantedByOtherTenants(tx: TransactionSql, derivationBuildIds: readonly string[]): Promise<string[]> {
  if (derivationBuildIds.length === 0) return [];
  const rows = await tx<{ id: string }[]>`
    select db.id from derivation_builds db
    where db.id = any(${derivationBuildIds as string[]}::uuid[])
      and ((db.status = 'completed' and db.done_for is not null) or (db.status = 'failed' and db.failed_for is not null))
      and ${wantedByAnother(tx)}
    order by db.id`;
  return rows.map((r) => r.id);
}

/**
 * Before an evaluation takes builds as its own (it starts building, or a direct build records its
 * graph), it share-locks those of them an outcome could scope meanwhile: the started ones, the
 * ready ones (a dispatch takes the row's lock first) and those queued again for other tenants (a
 * restore does). A queued build with open inputs needs one of those to end first, which waits, so
 * it needs no lock of its own (an evaluation's inputs are its builds too). An outcome (or a
 * restore) then either committed first (and the claim finds it, standing for another organization,
 * and queues it again) or waits for the claim, after which it sees the evaluation building and
 * queues it again itself (or leaves it queued). Without the lock each could miss the other. One
 * statement, in id order, before any other row lock of the transaction.
 */
export async function lockScopedBuilds(tx: TransactionSql, of: { evaluationId: string } | { derivationIds: readonly string[] }): Promise<void> {
  const which = 'evaluationId' in of
    ? tx`db.id in (select derivation_build_id from builds where evaluation_id = ${of.evaluationId})`
    : tx`db.derivation_id = any(${of.derivationIds as string[]}::uuid[])`;
  await tx`
    select db.id from derivation_builds db
    where ${which}
      and (db.status = 'started'
           or (db.status = 'queued' and (db.ready or db.done_for is not null or db.failed_for is not null)))
    order by db.id for share of db`;
}

/**
 * This evaluation's builds whose outcome stands for other organizations only: completed (its outputs
 * evicted since or not) or finally failed on a worker its organization does not trust. It queues them
 * again for itself (requeue other_tenant), when it starts building or records a direct build.
 */
export async function outcomesForOthers(tx: TransactionSql, evaluationId: string): Promise<{ id: string; status: 'completed' | 'failed' }[]> {
  return tx<{ id: string; status: 'completed' | 'failed' }[]>`
    with mine as (select p.organization_id from evaluations e join tasks t on t.id = e.task_id join projects p on p.id = t.project_id where e.id = ${evaluationId})
    select db.id, db.status from builds b join derivation_builds db on db.id = b.derivation_build_id
    where b.evaluation_id = ${evaluationId}
      and ((db.status = 'completed' and db.done_for is not null) or (db.status = 'failed' and db.failed_for is not null))
      and not ((select organization_id from mine) = any(coalesce(db.done_for, '{}') || coalesce(db.failed_for, '{}')))
    order by db.id`;
}

/**
 * Builds queued again for other tenants only that no building evaluation of another organization
 * wants any more (the restore pass's candidates, read without a lock: restorable checks them again
 * under theirs), through their partial index: the ready query never returns them once no project
 * is left to offer them to, and one still wanted costs the pass no lock.
 */
export const requeuedForOthers = (sql: Queryable, limit: number) => {
  // The limit written into the text: a statement without parameters is planned once per connection
  // (its generic plan); with the limit as a parameter PostgreSQL planned it again at every pass,
  // ~0.5 ms of planning for ~0.01 ms of execution (docs/builds.md "Plans of the status batches").
  if (!Number.isSafeInteger(limit) || limit < 1) throw new Error(`requeuedForOthers: the limit must be a positive integer, not ${limit}`);
  const rows = sql.unsafe(String(limit));
  return sql<{ id: string }[]>`
  (select db.id from derivation_builds db
   where db.status = 'queued' and (db.done_for is not null or db.failed_for is not null) and not ${wantedByAnother(sql)}
   order by db.id limit ${rows})
  union all
  (select db.id from derivation_builds db
   where db.status = 'failed' and db.done_for is not null and not ${wantedByOutsideCompletion(sql)}
   order by db.id limit ${rows})`;
};

/**
 * A building evaluation (ev) of an organization the build's (db) completion does not stand for
 * wants it: the organizations of a failure that landed after that completion (failed, done_for set)
 * count too, so their evaluation sees its own failure until it ends.
 */
const wantedByOutsideCompletion = (sql: Queryable) => wantedOutside(sql, sql`db.done_for`);

/**
 * Of these builds queued again for other tenants, those no building evaluation of an organization
 * outside their outcome wants any more (it was aborted, failed, or went back to the queue), locked:
 * they may be restored, to completed when a completion stands (done_for), to failed otherwise. The
 * lock comes first, in a statement of its own, so the check reads what a claim that held the row
 * committed.
 */
export async function restorable(tx: TransactionSql, derivationBuildIds: readonly string[]): Promise<{ id: string; to: 'completed' | 'failed' }[]> {
  if (derivationBuildIds.length === 0) return [];
  await tx`select id from derivation_builds where id = any(${derivationBuildIds as string[]}::uuid[]) order by id for no key update`;
  return tx<{ id: string; to: 'completed' | 'failed' }[]>`
    select db.id, case when db.done_for is not null then 'completed' else 'failed' end as to from derivation_builds db
    where db.id = any(${derivationBuildIds as string[]}::uuid[])
      and ((db.status = 'queued' and (db.done_for is not null or db.failed_for is not null) and not ${wantedByAnother(tx)})
        or (db.status = 'failed' and db.done_for is not null and not ${wantedByOutsideCompletion(tx)}))
    order by db.id`;
}
