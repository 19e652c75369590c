// Whose completion (docs/builds.md, "Build servers: whose completion"): a derivation_build is one
// record for every tenant, but a build done on an organization's build server stands only for that
// organization. Its output lives in that server's store and that organization's caches, and the
// server is trusted by no one else (it could return anything). derivation_builds.done_for
// (migration 0072) holds the organizations a completion stands for (null: every tenant). These are
// the statements that keep other tenants from taking such a completion as theirs.
import type { TransactionSql } from 'postgres';
import type { BuildEvent } from '../../actors/index.js';
import type { Queryable } from '../../storage/index.js';

/**
 * The `done_for` a status change writes (over derivation_builds b): a completion adds the
 * completing build server's organization to what it stood for, or stands for everyone when kiln's
 * own worker built it; a substitution (the wanting projects' caches hold it) and an eviction
 * reset it; every other change keeps it (a re-queue for another tenant above all).
 */
export function doneForUpdate(sql: Queryable, event: BuildEvent) {
  if (event.type === 'succeed') return sql`kiln_completion_scope(b.done_for, b.worker_id)`;
  if (event.type === 'substitute' || (event.type === 'requeue' && event.why === 'evicted')) return sql`null::uuid[]`;
  return sql`b.done_for`;
}

/**
 * Of these builds just completed on a build server, those an open evaluation of an organization
 * they do not stand for also wants: they go back to the queue for it (requeue other_tenant), in
 * the completion's transaction, so its readiness moves cancel out and no dependent of the other
 * tenant is ever made ready on an output it cannot read.
 */
export async function wantedByOtherTenants(tx: TransactionSql, derivationBuildIds: readonly string[]): Promise<string[]> {
  if (derivationBuildIds.length === 0) return [];
  const rows = await tx<{ id: string }[]>`
    select db.id from derivation_builds db
    where db.id = any(${derivationBuildIds as string[]}::uuid[]) and db.status = 'completed' and db.done_for is not null
      and exists (
        select 1 from builds b join evaluations e on e.id = b.evaluation_id and e.phase not in ('completed', 'failed', 'aborted')
        join tasks t on t.id = e.task_id join projects p on p.id = t.project_id
        where b.derivation_build_id = db.id and not (p.organization_id = any(db.done_for)))
    order by db.id`;
  return rows.map((r) => r.id);
}

/**
 * An evaluation recording derivations recorded before share-locks their builds running on a build
 * server, and those queued again for other tenants, before any other lock of its transaction: a
 * completion (or a restore) of one of them then either committed first (and the recording finds it
 * completed, standing for another organization, and queues it again) or waits for the recording,
 * after which it sees the new evaluation's builds rows and queues it again itself (or leaves it
 * queued). Without the lock each could miss the other.
 */
export async function lockBuildsOnServers(tx: TransactionSql, derivationIds: readonly string[]): Promise<void> {
  if (derivationIds.length === 0) return;
  await tx`
    select db.id from derivation_builds db
    where db.derivation_id = any(${derivationIds as string[]}::uuid[])
      and ((db.status = 'started' and db.worker_id in (select id from servers)) or (db.status = 'queued' and db.done_for is not null))
    order by db.id for share of db`;
}

/**
 * Of these builds queued again for other tenants, those no open evaluation of an organization they
 * do not stand for wants any more (it was aborted or failed), locked: they may be restored. The
 * lock comes first, in a statement of its own, so the check reads what a recording that held the
 * row committed (one still evaluating wants it too: its builds become ready once it is building).
 */
export async function restorable(tx: TransactionSql, derivationBuildIds: readonly string[]): Promise<string[]> {
  if (derivationBuildIds.length === 0) return [];
  await tx`select id from derivation_builds where id = any(${derivationBuildIds as string[]}::uuid[]) order by id for no key update`;
  const rows = await tx<{ id: string }[]>`
    select db.id from derivation_builds db
    where db.id = any(${derivationBuildIds as string[]}::uuid[]) and db.status = 'queued' and db.done_for is not null
      and not exists (
        select 1 from builds b join evaluations e on e.id = b.evaluation_id and e.phase not in ('completed', 'failed', 'aborted')
        join tasks t on t.id = e.task_id join projects p on p.id = t.project_id
        where b.derivation_build_id = db.id and not (p.organization_id = any(db.done_for)))
    order by db.id`;
  return rows.map((r) => r.id);
}

/**
 * Of these derivations' builds, those completed on a build server of an organization other than
 * this evaluation's, whose outputs a cache still holds: the evaluation queues them again for itself
 * (requeue other_tenant). A direct build's recording asks; graphRecorder.ts asks the same in its
 * query of reached builds.
 */
export async function completedForOthers(tx: TransactionSql, evaluationId: string, derivationIds: readonly string[]): Promise<string[]> {
  if (derivationIds.length === 0) return [];
  const rows = await tx<{ id: string }[]>`
    select db.id from derivation_builds db
    where db.derivation_id = any(${derivationIds as string[]}::uuid[]) and db.status = 'completed' and db.outputs_cached and db.done_for is not null
      and not ((select p.organization_id from evaluations e join tasks t on t.id = e.task_id join projects p on p.id = t.project_id where e.id = ${evaluationId}) = any(db.done_for))
    order by db.id`;
  return rows.map((r) => r.id);
}
