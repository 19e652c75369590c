// Every change of an evaluation's phase goes through here: the row and its evaluation.<phase>
// event in one transaction (DESIGN.md, "Actors and supervision"). The change names an event; the
// lifecycle (actors/lifecycles.ts) says which phases it leaves and the one it reaches, and the
// update applies only from those (an aborted evaluation stays aborted).
import type { Sql, TransactionSql } from 'postgres';
import type { EvaluationPhase } from '../../protocol/index.js';
import type { Emit, Events } from '../../storage/index.js';
import { evaluationMove, type EvaluationContext, type EvaluationEvent } from '../../actors/index.js';
import { claimForEvaluation } from './tenantClaims.js';
import { mayRunAgain } from './graphRecorder.js';

export interface EvaluationLabel {
  id: string;
  project_id: string;
  organization_id: string;
  task_id: string;
  project: string;
  task: string;
  commit: string | null;
  wildcard: string;
}

export const FINAL_PHASES: readonly EvaluationPhase[] = ['completed', 'failed', 'aborted'];

export async function evaluationLabel(sql: Sql | TransactionSql, id: string): Promise<EvaluationLabel | null> {
  const [row] = await sql<EvaluationLabel[]>`
    select e.id, p.id as project_id, p.organization_id, t.id as task_id, o.name || '/' || p.name as project, t.name as task, e.commit, e.wildcard
    from evaluations e join tasks t on t.id = e.task_id join projects p on p.id = t.project_id join organizations o on o.id = p.organization_id
    where e.id = ${id}`;
  return row ?? null;
}

export interface PhaseChange {
  event: EvaluationEvent;
  /** what the lifecycle's guards look at when the event is a failure (attempts left) */
  context?: Partial<EvaluationContext>;
  /** stored as the error of a failed or aborted evaluation, and sent with its event */
  reason?: string;
  workerId?: string | null;
  /**
   * A dispatch's capability for the shared evaluation cache (evalInputCache.ts): the SHA-256 of its
   * token, written with the phase so the job is never sent without it and no earlier token answers
   * in between. It resets what the dispatch may upload.
   */
  inputCacheTokenHash?: string;
}

/** The phases in which the evaluation's worker holds its capability for the shared evaluation cache. */
export const INPUT_CACHE_PHASES: readonly EvaluationPhase[] = ['fetching', 'evaluating'];

/** Applies the change when the evaluation is in a phase its event leaves; false when it was not. */
export async function changePhase(events: Events, id: string, change: PhaseChange): Promise<boolean> {
  // The move to building claims the evaluation's builds under their locks (tenantScope.ts), which
  // a completion batch may hold in another order: a deadlock or serialization failure runs it again.
  for (let attempt = 1; ; attempt++) {
    try {
      return await events.transaction((tx, emit) => applyPhaseChange(tx, emit, id, change));
    } catch (error) {
      if (attempt >= 3 || !mayRunAgain(error)) throw error;
    }
  }
}


/** The same change for several evaluations inside the caller's transaction (the re-queue of lost jobs); the ids it applied to. */
export async function applyPhaseChanges(tx: TransactionSql, emit: Emit, ids: readonly string[], change: PhaseChange): Promise<string[]> {
  const applied: string[] = [];
  for (const id of ids) if (await applyPhaseChange(tx, emit, id, change)) applied.push(id);
  return applied;
}

/** One change and its evaluation.<phase> event inside the caller's transaction; false when it did not apply. */
export async function applyPhaseChange(tx: TransactionSql, emit: Emit, id: string, change: PhaseChange): Promise<boolean> {
  const { from, to } = evaluationMove(change.event, change.context);
  const final = FINAL_PHASES.includes(to);
  // a new capability, or none once the evaluation stops running (back to the queue, or over)
  const newCapability = change.inputCacheTokenHash !== undefined || !INPUT_CACHE_PHASES.includes(to);
  const updated = await tx<{ id: string }[]>`
    update evaluations set phase = ${to}, updated_at = now(),
      error = coalesce(${to === 'failed' || to === 'aborted' ? (change.reason ?? null) : null}, error),
      started_at = case when ${to === 'evaluating'} then coalesce(started_at, now()) else started_at end,
      queued_at = case when ${to === 'queued'} then now() else queued_at end,
      attempts = attempts + ${to === 'evaluating' ? 1 : 0},
      worker_id = case when ${change.workerId !== undefined} then ${change.workerId ?? null}::uuid else worker_id end,
      finished_at = case when ${final} then now() else finished_at end,
      input_cache_token_hash = case when ${newCapability} then ${change.inputCacheTokenHash ?? null}::text else input_cache_token_hash end,
      input_cache_wanted = case when ${newCapability} then '{}' else input_cache_wanted end,
      input_cache_bytes = case when ${newCapability} then 0 else input_cache_bytes end
    where id = ${id} and phase = any(${from as string[]}) returning id`;
  if (updated.length === 0) return false;
  // Building from now on: it takes the builds whose outcome stands for other organizations only as
  // none of its own (docs/builds.md, "Whose completion"); while it evaluated, it held none of them.
  if (to === 'building') await claimForEvaluation(tx, emit, id);
  const label = await evaluationLabel(tx, id);
  if (label) {
    emit(`evaluation.${to}`, {
      evaluation_id: id, project: label.project, task: label.task, phase: to,
      ...(label.commit ? { commit: label.commit } : {}), attr: label.wildcard.slice(0, 1000),
      ...(change.reason ? { reason: change.reason.slice(0, 4000) } : {}),
    }, { projectId: label.project_id, organizationId: label.organization_id, taskId: label.task_id, evaluationId: id });
  }
  return true;
}

/** A new evaluation parked until a member approves it (a pull request from a fork, docs/git-hosts.md "Approval"): queued → waiting. */
export async function parkForApproval(tx: TransactionSql, emit: Emit, id: string, reason: string): Promise<void> {
  await tx`update evaluations set awaiting_approval = true where id = ${id}`;
  await applyPhaseChange(tx, emit, id, { event: { type: 'wait' }, reason });
}
