// Superseded evaluations (docs/git-hosts.md, "Superseded evaluations"): when a push, a poll or a
// pull request event starts an evaluation of a newer commit of a branch or pull request, the still
// open evaluations of the same task for an older commit of that branch (push or poll) or that pull
// request are aborted, unless the project turned cancel_superseded off. Manual evaluations and
// restarts neither supersede nor are superseded: a person asked for them. The phase changes go in
// the transaction that writes the new evaluation; stopping what runs comes after it commits
// (stopSuperseded), as for POST /evals/{id} abort.
import type { Sql, TransactionSql } from 'postgres';
import type { Emit, Events } from '../../storage/index.js';
import { abortUnwantedBuilds } from './buildAborts.js';
import type { TriggerOf } from './evaluationInsert.js';
import { applyPhaseChange } from './evaluationPhases.js';
import type { SchedulerPort } from './schedulerPort.js';

const OPEN_PHASES = ['queued', 'waiting', 'approval_granted', 'fetching', 'evaluating', 'building'];

export interface NewerEvaluation {
  id: string;
  taskId: string;
  commit: string;
  started: TriggerOf;
}

/** Aborts the open evaluations `newer` supersedes, in the caller's transaction; their ids. */
export async function supersedeOlder(tx: TransactionSql, emit: Emit, newer: NewerEvaluation): Promise<string[]> {
  const { started } = newer;
  if (started.trigger === 'manual') return [];
  const same = started.trigger === 'pull_request'
    ? tx`e.trigger = 'pull_request' and e.pull_request = ${started.pullRequest}`
    : tx`e.trigger in ('push', 'poll') and e.branch = ${started.branch}`;
  const older = await tx<{ id: string }[]>`
    select e.id from evaluations e join tasks t on t.id = e.task_id join projects p on p.id = t.project_id
    where e.task_id = ${newer.taskId} and e.id <> ${newer.id} and p.cancel_superseded
      and e.commit is distinct from ${newer.commit} and e.phase = any(${OPEN_PHASES}) and ${same}
    order by e.created_at for update of e`;
  const aborted: string[] = [];
  for (const { id } of older) {
    const reason = `superseded by evaluation ${newer.id} of commit ${newer.commit.slice(0, 12)}`;
    if (await applyPhaseChange(tx, emit, id, { event: { type: 'abort' }, reason })) aborted.push(id);
  }
  return aborted;
}

/**
 * A closed (or merged) pull request: the open evaluations of pull request `pullRequest` of these
 * tasks are aborted (projects with cancel_superseded off keep theirs), in the caller's transaction; their ids.
 */
export async function abortClosedPullRequest(tx: TransactionSql, emit: Emit, taskIds: readonly string[], pullRequest: number, merged: boolean): Promise<string[]> {
  if (taskIds.length === 0) return [];
  const open = await tx<{ id: string }[]>`
    select e.id from evaluations e join tasks t on t.id = e.task_id join projects p on p.id = t.project_id
    where e.task_id = any(${taskIds}::uuid[]) and p.cancel_superseded
      and e.trigger = 'pull_request' and e.pull_request = ${pullRequest} and e.phase = any(${OPEN_PHASES})
    order by e.created_at for update of e`;
  const aborted: string[] = [];
  const reason = `pull request #${pullRequest} was ${merged ? 'merged' : 'closed'}`;
  for (const { id } of open) {
    if (await applyPhaseChange(tx, emit, id, { event: { type: 'abort' }, reason })) aborted.push(id);
  }
  return aborted;
}

/** After the transaction: the superseded evaluations' builds no other evaluation wants stop, and their evaluation jobs are cancelled. */
export async function stopSuperseded(events: Events, sql: Sql, scheduler: Pick<SchedulerPort, 'cancelEvaluation'>, ids: readonly string[]): Promise<void> {
  for (const id of ids) {
    await abortUnwantedBuilds(events, sql, id);
    scheduler.cancelEvaluation(id);
  }
}
