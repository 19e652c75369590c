// eval.maxKeep (docs/builds.md, "Keeping evaluations"): a task keeps at most N evaluations. N is
// the task's keep_evaluations capped by eval.maxKeep, where 0 means "no limit" on either side.
// Older evaluations go once they are final (completed, failed, aborted); an older one still
// running stays until a later prune. Deleting an evaluation removes its builds rows and attribute
// errors (foreign keys cascade); the shared derivation_builds, their logs and the cached outputs
// stay, since other evaluations may use them.
import type { Sql } from 'postgres';

/** The number of evaluations a task keeps, or null for no limit. */
export function effectiveKeep(taskKeep: number, maxKeep: number): number | null {
  const limits = [taskKeep, maxKeep].filter((n) => n > 0);
  return limits.length === 0 ? null : Math.min(...limits);
}

/** Deletes the task's final evaluations beyond the newest N; returns their ids. */
export async function pruneTaskEvaluations(sql: Sql, taskId: string, maxKeep: number): Promise<string[]> {
  const [task] = await sql<{ keep_evaluations: number }[]>`select keep_evaluations from tasks where id = ${taskId}`;
  if (!task) return [];
  const keep = effectiveKeep(task.keep_evaluations, maxKeep);
  if (keep === null) return [];
  const deleted = await sql<{ id: string }[]>`
    with ranked as (
      select id, phase, row_number() over (order by created_at desc, id desc) as n from evaluations where task_id = ${taskId})
    delete from evaluations where id in (
      select id from ranked where n > ${keep} and phase in ('completed', 'failed', 'aborted'))
    returning id`;
  return deleted.map((d) => d.id);
}

/** The prune hook services call after creating an evaluation. */
export const evaluationPruner = (sql: Sql, maxKeep: number) => async (taskId: string): Promise<void> => {
  await pruneTaskEvaluations(sql, taskId, maxKeep);
};
