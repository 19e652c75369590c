// What the messages of an evaluation job do (docs/builds.md): the derivation graph's batches are
// recorded in order, the result moves the evaluation to building (or to failed when a batch could
// not be recorded), and a FailedTransient failure with attempts left queues it again.
import type { Logger } from 'pino';
import type { Sql } from 'postgres';
import type { JobFailure, Message } from '../../protocol/index.js';
import type { Events, PhaseSampleBuffer } from '../../storage/index.js';
import { evaluationMove } from '../../actors/index.js';
import { changePhase } from './evaluationPhases.js';
import { recordEvalBatch, stageEvalBatch, type StagedEvalBatch } from './graphRecorder.js';
import type { EvalJobEntry, JobTable } from './schedulerJobs.js';
import { recordEvaluationStats } from './buildStatistics.js';
import type { ConnectedWorker } from '../workers/index.js';
import type { PlannerStatistics } from './plannerStatistics.js';

/** evaluation.activity events one job may cause: a worker's messages are few (docs/metrics.md), a flood is cut. */
const ACTIVITY_PER_JOB = 1000;
const RECORDING_FAILED = { reason: 'server_error', message: 'the server could not record the derivation graph' } as const;

interface ActivityTarget {
  identity: { evaluation_id: string; project: string; task: string };
  scope: { projectId: string; organizationId: string; taskId: string; evaluationId: string };
  sent: number;
}
const activityTargets = new WeakMap<EvalJobEntry, Promise<ActivityTarget | null>>();

function activityTarget(sql: Sql, job: EvalJobEntry): Promise<ActivityTarget | null> {
  let target = activityTargets.get(job);
  if (target === undefined) {
    target = sql<{ project: string; task: string; project_id: string; organization_id: string; task_id: string }[]>`
      select o.name || '/' || p.name as project, t.name as task, p.id as project_id, p.organization_id, t.id as task_id
      from evaluations e join tasks t on t.id = e.task_id join projects p on p.id = t.project_id join organizations o on o.id = p.organization_id
      where e.id = ${job.evaluationId}`.then(([row]) => (row ? {
      identity: { evaluation_id: job.evaluationId, project: row.project, task: row.task },
      scope: { projectId: row.project_id, organizationId: row.organization_id, taskId: row.task_id, evaluationId: job.evaluationId },
      sent: 0,
    } : null));
    activityTargets.set(job, target);
  }
  return target;
}

export interface EvaluationJobDeps {
  sql: Sql;
  events: Events;
  jobs: JobTable;
  log: Logger;
  /** build.maxAttempts */
  maxAttempts: number;
  /** completes the evaluation if it has no open build */
  finishEvaluation(evaluationId: string): Promise<void>;
  /** the scheduler runs a pass: the evaluation's builds or the queued evaluation wait for one */
  wake(): void;
  /** the stored phase samples: an evaluation job's time on the worker */
  phases?: Pick<PhaseSampleBuffer, 'record'>;
  /** the graph tables' planner statistics, refreshed after a large recording */
  statistics?: Pick<PlannerStatistics, 'recorded'>;
}

export async function evaluationJobMessage(deps: EvaluationJobDeps, job: EvalJobEntry, message: Message, worker: Pick<ConnectedWorker, 'link'>): Promise<void> {
  const { sql, events, jobs } = deps;
  if (message.t === 'evalBatch') {
    // Credit (docs/proto.md, "Evaluation batches"): what waits here for recording stays bounded
    // however fast the worker sends. A batch past it is dropped unread, and the graph is then not whole.
    if (job.credit === 0) {
      if (job.failure === null) deps.log.warn({ evaluation: job.evaluationId, worker: job.workerId }, 'an evaluation batch came without credit');
      job.failure ??= { reason: 'worker_error', message: 'the worker sent more evaluation batches than the server granted' };
      return;
    }
    job.credit -= 1;
    job.derivations += message.derivations.length;
    job.actor.send({ type: 'progress', amount: message.derivations.length });
    // as COPY rows at once: the decoded batch is not kept while earlier ones are recorded
    let staged: StagedEvalBatch | null = null;
    try {
      staged = stageEvalBatch(message);
    } catch (error) {
      job.failure ??= RECORDING_FAILED;
      deps.log.error({ err: error, evaluation: job.evaluationId }, 'an evaluation batch cannot be recorded');
    }
    const recording = staged;
    job.chain = job.chain.then(() => (recording === null || job.failure !== null ? undefined : recordEvalBatch(events, job.evaluationId, recording))).catch((error: unknown) => {
      job.failure ??= RECORDING_FAILED;
      deps.log.error({ err: error, evaluation: job.evaluationId }, 'recording an evaluation batch failed');
    }).then(() => {
      // granted after a failed batch too: the worker finishes, and its result fails the evaluation
      job.credit += 1;
      worker.link.send({ t: 'evalCredit', jobId: job.jobId, batches: 1 });
    });
    return;
  }
  if (message.t === 'evalActivity') {
    const target = await activityTarget(sql, job);
    if (target === null || target.sent >= ACTIVITY_PER_JOB) return;
    target.sent += 1;
    events.publish('evaluation.activity', { ...target.identity, kind: message.kind, message: message.message }, target.scope);
    return;
  }
  if (message.t === 'evalResult') {
    if (!jobs.end(job, { type: 'succeeded' })) return;
    deps.phases?.record('evaluation', 'run', message.durationMs / 1000);
    // After the graph's batches: statistics on GET /evals/{id} then mean the builds are there too.
    await job.chain;
    await recordEvaluationStats(sql, job.evaluationId, message.durationMs, message.stats)
      .catch((error: unknown) => deps.log.warn({ err: error, evaluation: job.evaluationId }, 'storing an evaluation\'s statistics failed'));
    if (job.failure !== null) {
      await changePhase(events, job.evaluationId, {
        event: { type: 'fail', class: 'FailedPermanent', reason: job.failure.reason }, reason: job.failure.message,
      });
      return;
    }
    try {
      await changePhase(events, job.evaluationId, { event: { type: 'succeed' } });
    } catch (error) {
      // its job has ended, so nothing else would move it on: it would stay evaluating for good
      deps.log.error({ err: error, evaluation: job.evaluationId }, 'an evaluation could not start building');
      await failEvaluation(deps, job.evaluationId, { class: 'FailedTransient', reason: 'server_error', message: 'the server could not start building the evaluation' });
      return;
    }
    void deps.statistics?.recorded(job.derivations);
    await deps.finishEvaluation(job.evaluationId);
    deps.wake();
    return;
  }
  if (message.t === 'jobFailed') {
    if (!jobs.end(job, { type: 'failed', reason: message.failure.reason })) return;
    await job.chain;
    await failEvaluation(deps, job.evaluationId, message.failure);
  }
}

/** The lifecycle decides: a FailedTransient failure with attempts left goes back to the queue, anything else fails it. */
async function failEvaluation(deps: EvaluationJobDeps, evaluationId: string, failure: { class: JobFailure['class']; reason: string; message: string }): Promise<void> {
  const [row] = await deps.sql<{ attempts: number }[]>`select attempts from evaluations where id = ${evaluationId}`;
  const event = { type: 'fail' as const, class: failure.class, reason: failure.reason };
  const context = { attempts: row?.attempts ?? 0, maxAttempts: deps.maxAttempts };
  if (evaluationMove(event, context).to === 'queued') await changePhase(deps.events, evaluationId, { event, context, workerId: null });
  else await changePhase(deps.events, evaluationId, { event, context, reason: `${failure.reason}: ${failure.message}` });
  deps.wake();
}
