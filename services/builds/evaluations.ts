// Evaluations over REST: start (a project's default task at the head of its branch, or a task
// at a commit and attribute), read, abort, restart. The scheduler picks queued ones up (docs/builds.md).
import type { Sql } from 'postgres';
import { ApiError, type EvaluateTaskBody, type EvaluationPhase, type EvaluationTrigger, type ProjectEvaluationsQuery } from '../../protocol/index.js';
import type { Events } from '../../storage/index.js';
import { userIdOf } from '../access/index.js';
import { abortUnwantedBuilds } from './buildAborts.js';
import { applyPhaseChange, changePhase, evaluationLabel, FINAL_PHASES } from './evaluationPhases.js';
import { insertEvaluation, type TriggerOf } from './evaluationInsert.js';
import type { Principal } from '../access/index.js';
import { resolveHead } from '../projects/index.js';
import { vetRepository, type RepositoryPolicy } from '../projects/index.js';
import { demandProject, demandProjectRef, type ProjectRow } from '../access/index.js';
import { listProjectEvaluations, type ProjectEvaluationsPageView } from './projectEvaluations.js';
import type { SchedulerPort } from './schedulerPort.js';
import { evaluationStatsView, type EvaluationStatsView } from './buildStatistics.js';
import { organizationOfEvaluation, statusFor } from './organizationStatus.js';

export interface EvaluationView {
  id: string;
  project: string;
  task: string;
  commit: string | null;
  attr: string;
  trigger: EvaluationTrigger;
  branch: string | null;
  pull_request: number | null;
  phase: string;
  error: string | null;
  attempts: number;
  worker: string | null;
  created_at: Date;
  started_at: Date | null;
  finished_at: Date | null;
  builds: { total: number; queued: number; started: number; completed: number; failed: number; substituted: number; aborted: number };
}

export interface EvaluationsDeps {
  sql: Sql;
  events: Events;
  /** the scheduler: a new evaluation is waiting, or an aborted one must stop (its jobs are cancelled) */
  scheduler: Pick<SchedulerPort, 'wake' | 'cancelEvaluation'>;
  /** eval.maxKeep: prune the task's old evaluations after a new one (services/builds/evaluationRetention.ts) */
  prune?(taskId: string): Promise<void>;
  /** projects.allowLocalRepositories: checked again at each evaluation (the option or DNS may have changed since the project was saved) */
  repositories: RepositoryPolicy;
}

async function taskOf(sql: Sql, project: ProjectRow, name: string): Promise<{ id: string; wildcard: string | null; branch: string | null }> {
  if (name === 'default') {
    await sql`insert into tasks (project_id, name) values (${project.id}, 'default') on conflict (project_id, name) do nothing`;
  }
  const [task] = await sql<{ id: string; wildcard: string | null; branch: string | null }[]>`
    select id, wildcard, branch from tasks where project_id = ${project.id} and name = ${name}`;
  if (!task) throw new ApiError('not_found', `no task "${name}" in project "${project.organization}/${project.name}"`);
  return task;
}

export function evaluationsService(deps: EvaluationsDeps) {
  const { sql } = deps;

  async function start(who: Principal, project: ProjectRow, taskName: string, body: EvaluateTaskBody): Promise<string> {
    if (!project.active) throw new ApiError('project_inactive', `project "${project.organization}/${project.name}" is disabled; enable it with POST /projects/${project.organization}/${project.name}/active`);
    const task = await taskOf(sql, project, taskName);
    const gitOptions = await vetRepository(project.repository, deps.repositories);
    const commit = body.commit ?? (await resolveHead(project.repository, task.branch ?? project.default_branch, gitOptions));
    const wildcard = body.attr ?? task.wildcard ?? project.wildcard;
    return deps.events.transaction((tx, emit) => insertEvaluation(tx, emit, {
      project, task: { id: task.id, name: taskName }, commit, wildcard, started: { trigger: 'manual' }, createdBy: userIdOf(who),
    })).then(async (id) => {
      deps.scheduler.wake();
      await deps.prune?.(task.id);
      return id;
    });
  }

  /** The evaluation and the project it belongs to, when `who` may see it (404 otherwise). */
  async function visible(who: Principal, id: string, permission: 'viewProject' | 'triggerEvaluation') {
    const label = await evaluationLabel(sql, id);
    if (!label) throw new ApiError('not_found', `no evaluation ${id}`);
    await demandProjectRef(sql, who, label.project_id, permission).catch((e: unknown) => {
      if (e instanceof ApiError && e.status === 404) throw new ApiError('not_found', `no evaluation ${id}`);
      throw e;
    });
    return label;
  }

  return {
    visible,

    async evaluateProject(who: Principal, org: string, name: string): Promise<string> {
      const { row } = await demandProject(sql, who, org, name, 'triggerEvaluation');
      return start(who, row, 'default', {});
    },

    async evaluateTask(who: Principal, project: string, task: string, body: EvaluateTaskBody): Promise<string> {
      const { row } = await demandProjectRef(sql, who, project, 'triggerEvaluation');
      return start(who, row, task, body);
    },

    /** The project's evaluations of every task, newest first. */
    async listProject(who: Principal, org: string, name: string, query: ProjectEvaluationsQuery): Promise<ProjectEvaluationsPageView> {
      const { row } = await demandProject(sql, who, org, name, 'viewProject');
      return listProjectEvaluations(sql, row.id, query);
    },

    async get(who: Principal, id: string): Promise<EvaluationView & { statistics: EvaluationStatsView }> {
      const allowed = visible(who, id, 'viewProject');
      // The row and its build counts are independent reads: in parallel (the evaluation page waits for
      // them), and beside the access check, which they do not wait for: nothing they read is returned
      // before it passed.
      const reads = Promise.all([
        sql<(Omit<EvaluationView, 'project' | 'task' | 'builds'> & Parameters<typeof evaluationStatsView>[0])[]>`
          select id, commit, wildcard as attr, trigger, branch, pull_request, phase, error, attempts, worker_id as worker, created_at, started_at, finished_at,
            eval_duration_ms, eval_stats
          from evaluations where id = ${id}`,
        sql<{ status: string; n: number }[]>`
          select ${statusFor(sql, organizationOfEvaluation(sql, sql`${id}::uuid`))} as status, count(*)::int as n
          from builds b join derivation_builds db on db.id = b.derivation_build_id
          where b.evaluation_id = ${id} group by 1`,
      ]);
      reads.catch(() => undefined);
      const label = await allowed;
      const [[found], counts] = await reads;
      const { eval_duration_ms, eval_stats, ...row } = found!;
      const builds = { total: 0, queued: 0, started: 0, completed: 0, failed: 0, substituted: 0, aborted: 0 };
      for (const c of counts) {
        builds.total += c.n;
        if (c.status in builds) builds[c.status as keyof typeof builds] += c.n;
      }
      return { ...row, project: label.project, task: label.task, builds, statistics: evaluationStatsView({ eval_duration_ms, eval_stats }) };
    },

    /**
     * A member with triggerEvaluation lets an evaluation parked for approval run: waiting →
     * approval_granted (evaluation.approval_granted) → queued, in one transaction.
     */
    async approve(who: Principal, id: string): Promise<string> {
      await visible(who, id, 'triggerEvaluation');
      const approved = await deps.events.transaction(async (tx, emit) => {
        const [row] = await tx<{ id: string }[]>`
          update evaluations set awaiting_approval = false where id = ${id} and awaiting_approval and phase = 'waiting' returning id`;
        if (!row) return false;
        await applyPhaseChange(tx, emit, id, { event: { type: 'approve' } });
        await applyPhaseChange(tx, emit, id, { event: { type: 'requeue', why: 'approved' } });
        return true;
      });
      if (!approved) throw new ApiError('evaluation_not_awaiting_approval', `evaluation ${id} is not waiting for approval`);
      deps.scheduler.wake();
      return 'Evaluation approved';
    },

    async abort(who: Principal, id: string): Promise<string> {
      await visible(who, id, 'triggerEvaluation');
      if (!(await changePhase(deps.events, id, { event: { type: 'abort' }, reason: 'aborted by request' }))) {
        const [row] = await sql<{ phase: string }[]>`select phase from evaluations where id = ${id}`;
        throw new ApiError('evaluation_finished', `evaluation ${id} is already ${row?.phase ?? 'gone'} and cannot be aborted`);
      }
      await abortUnwantedBuilds(deps.events, deps.sql, id);
      deps.scheduler.cancelEvaluation(id);
      return 'Evaluation aborted';
    },

    /**
     * A finished evaluation again (docs/builds.md, "Restarting"): a new one of the same task,
     * commit, attribute and trigger, which tries the failed builds it reaches once more. Its id.
     */
    async restart(who: Principal, id: string): Promise<string> {
      const label = await visible(who, id, 'triggerEvaluation');
      const { row: project } = await demandProjectRef(sql, who, label.project_id, 'triggerEvaluation');
      if (!project.active) throw new ApiError('project_inactive', `project "${project.organization}/${project.name}" is disabled; enable it with POST /projects/${project.organization}/${project.name}/active`);
      const [old] = await sql<{
        phase: string; task_id: string; task: string; commit: string | null; wildcard: string; trigger: EvaluationTrigger; branch: string | null; pull_request: number | null;
        source_upload_id: string | null; source_sha256: string | null;
      }[]>`
        select e.phase, e.task_id, t.name as task, e.commit, e.wildcard, e.trigger, e.branch, e.pull_request, e.source_upload_id, e.source_sha256
        from evaluations e join tasks t on t.id = e.task_id where e.id = ${id}`;
      if (!old || !FINAL_PHASES.includes(old.phase as EvaluationPhase)) {
        throw new ApiError('evaluation_unfinished', `evaluation ${id} is ${old?.phase ?? 'gone'}; only a completed, failed or aborted evaluation can be restarted`);
      }
      // The repository policy holds at each evaluation; one that failed before it resolved its
      // commit resolves the branch head again.
      // An uploaded tree is evaluated again from the same upload (the scheduler fails it with why when the upload is gone).
      const source = old.source_sha256 === null ? null : { uploadId: old.source_upload_id, sha256: old.source_sha256 };
      let commit: string | null = null;
      if (source === null) {
        const gitOptions = await vetRepository(project.repository, deps.repositories);
        commit = old.commit ?? (await resolveHead(project.repository, project.default_branch, gitOptions));
      }
      const started: TriggerOf = old.trigger === 'pull_request' && old.pull_request !== null ? { trigger: 'pull_request', pullRequest: old.pull_request }
        : (old.trigger === 'push' || old.trigger === 'poll') && old.branch !== null ? { trigger: old.trigger, branch: old.branch }
          : { trigger: 'manual' };
      const restarted = await deps.events.transaction(async (tx, emit) => {
        const newId = await insertEvaluation(tx, emit, {
          project, task: { id: old.task_id, name: old.task }, commit, wildcard: old.wildcard, started, createdBy: userIdOf(who), ...(source ? { source } : {}),
        });
        await tx`update evaluations set restart_of = ${id}, retry_failed = true where id = ${newId}`;
        return newId;
      });
      deps.scheduler.wake();
      await deps.prune?.(old.task_id);
      return restarted;
    },
  };
}
export type EvaluationsService = ReturnType<typeof evaluationsService>;
