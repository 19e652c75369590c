// An evaluation of an uploaded source tree (docs/builds.md, "Evaluating a source upload"): what
// `kiln build` starts after POST /build-requests/source. The uploader evaluates their own upload
// (another member's is a 404, like an unknown id) in the project's task "upload", or a task they
// name; the worker fetches the tarball instead of a commit (services/builds/buildPlacement.ts).
import type { Sql } from 'postgres';
import { ApiError, type EvaluateSourceBody } from '../../protocol/index.js';
import type { Events } from '../../storage/index.js';
import { demandProjectRef, userIdOf, type Principal } from '../access/index.js';
import { insertEvaluation } from './evaluationInsert.js';
import type { SchedulerPort } from './schedulerPort.js';

/** The task that holds a project's source evaluations when none is named; created on first use. */
export const SOURCE_TASK = 'upload';

export interface SourceEvaluationsDeps {
  sql: Sql;
  events: Events;
  scheduler: Pick<SchedulerPort, 'wake'>;
  /** eval.maxKeep for the task */
  prune?(taskId: string): Promise<void>;
  now?: () => Date;
}

export function sourceEvaluationsService(deps: SourceEvaluationsDeps) {
  const { sql } = deps;
  const now = deps.now ?? (() => new Date());
  return {
    /** Starts the evaluation of upload `id`; its id. */
    async evaluate(who: Principal, id: string, body: EvaluateSourceBody): Promise<string> {
      const missing = () => new ApiError('not_found', `no source upload ${id} of yours (it may have expired)`);
      const userId = userIdOf(who);
      const [upload] = await sql<{ project_id: string; created_by: string | null; sha256: string; expires_at: Date }[]>`
        select project_id, created_by, sha256, expires_at from source_uploads where id = ${id}`;
      if (!upload || upload.created_by === null || upload.created_by !== userId || upload.expires_at < now()) throw missing();
      const { row: project } = await demandProjectRef(sql, who, upload.project_id, 'triggerEvaluation');
      if (!project.active) throw new ApiError('project_inactive', `project "${project.organization}/${project.name}" is disabled; enable it with POST /projects/${project.organization}/${project.name}/active`);
      const taskName = body.task ?? SOURCE_TASK;
      if (taskName === SOURCE_TASK) {
        await sql`insert into tasks (project_id, name) values (${project.id}, ${SOURCE_TASK}) on conflict (project_id, name) do nothing`;
      }
      const [task] = await sql<{ id: string; wildcard: string | null }[]>`select id, wildcard from tasks where project_id = ${project.id} and name = ${taskName}`;
      if (!task) throw new ApiError('not_found', `no task "${taskName}" in project "${project.organization}/${project.name}"`);
      const evaluationId = await deps.events.transaction((tx, emit) => insertEvaluation(tx, emit, {
        project, task: { id: task.id, name: taskName }, commit: null, wildcard: body.attr ?? task.wildcard ?? project.wildcard,
        started: { trigger: 'manual' }, createdBy: userId, source: { uploadId: id, sha256: upload.sha256 },
      }));
      deps.scheduler.wake();
      await deps.prune?.(task.id);
      return evaluationId;
    },
  };
}
export type SourceEvaluationsService = ReturnType<typeof sourceEvaluationsService>;
