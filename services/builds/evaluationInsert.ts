// Writing a new evaluation: the row with what started it and its evaluation.queued event, in the
// caller's transaction. A request (services/builds/evaluations.ts) and a Git host's webhook
// (services/gitHosts/) both start evaluations through here, so the row and its event never differ.
import type { TransactionSql } from 'postgres';
import type { EvaluationTrigger } from '../../protocol/index.js';
import type { Emit } from '../../storage/index.js';

/** What started an evaluation: a push or poll names its branch, a pull request its number. */
export type TriggerOf =
  | { trigger: 'manual' }
  | { trigger: 'push' | 'poll'; branch: string }
  | { trigger: 'pull_request'; pullRequest: number };

export interface NewEvaluation {
  project: { id: string; organization_id: string; organization: string; name: string; repository: string };
  task: { id: string; name: string };
  /** null for an evaluation of an uploaded source tree */
  commit: string | null;
  wildcard: string;
  /** the source upload evaluated instead of a commit (`kiln build`, services/builds/sourceEvaluations.ts) */
  source?: { uploadId: string | null; sha256: string };
  started: TriggerOf;
  /** the account that asked; null for a webhook or a poll */
  createdBy: string | null;
}

export async function insertEvaluation(tx: TransactionSql, emit: Emit, e: NewEvaluation): Promise<string> {
  const trigger: EvaluationTrigger = e.started.trigger;
  const branch = e.started.trigger === 'push' || e.started.trigger === 'poll' ? e.started.branch : null;
  const pullRequest = e.started.trigger === 'pull_request' ? e.started.pullRequest : null;
  const [row] = await tx<{ id: string }[]>`
    insert into evaluations (task_id, repository, commit, wildcard, created_by, trigger, branch, pull_request, source_upload_id, source_sha256)
    values (${e.task.id}, ${e.project.repository}, ${e.commit}, ${e.wildcard}, ${e.createdBy}, ${trigger}, ${branch}, ${pullRequest},
      ${e.source?.uploadId ?? null}, ${e.source?.sha256 ?? null})
    returning id`;
  emit('evaluation.queued', {
    evaluation_id: row!.id, project: `${e.project.organization}/${e.project.name}`, task: e.task.name, phase: 'queued', ...(e.commit === null ? {} : { commit: e.commit }), attr: e.wildcard,
  }, { projectId: e.project.id, organizationId: e.project.organization_id, taskId: e.task.id, evaluationId: row!.id });
  return row!.id;
}
