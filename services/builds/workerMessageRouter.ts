// Where what a worker says goes (docs/proto.md): NAR pushes to the worker NAR receiver, a job's
// messages to that job's handler (evaluation batches and results, build logs and results; a
// changeJob's answers to changeJobs.ts), a refusal or a lost connection back to the queue. A message about a job this process did not give
// that worker, or one that already ended (the job actor says so), is dropped.
import type { Logger } from 'pino';
import type { Sql } from 'postgres';
import type { Message, RejectCode } from '../../protocol/index.js';
import type { Events, KilnMetrics, PhaseSampleBuffer } from '../../storage/index.js';
import type { BuildLogs } from './buildLogs.js';
import type { BuildOutcomes } from './buildOutcomes.js';
import type { BuildPlacement } from './buildPlacement.js';
import { DECLINES_TO_CAP } from './buildDeclines.js';
import type { ChangeJobs } from './changeJobs.js';
import { evaluationJobMessage, type EvaluationJobDeps } from './evaluationJobs.js';
import { changePhase } from './evaluationPhases.js';
import { BuildSampleWriter, endRunningReading, recordBuildReadings } from './buildStatistics.js';
import type { JobCancellations } from './jobCancellations.js';
import type { BuildJobEntry, Job, JobTable } from './schedulerJobs.js';
import type { ConnectedWorker } from '../workers/index.js';
import type { WorkerNars } from '../workers/index.js';

export interface WorkerMessageRouterDeps {
  events: Events;
  /** the open_pr action's change jobs: their answers go there, not to the job table */
  changeJobs: ChangeJobs;
  jobs: JobTable;
  nars: WorkerNars;
  logs: BuildLogs;
  outcomes: BuildOutcomes;
  cancellations: JobCancellations;
  placement: BuildPlacement;
  evaluationJobs: EvaluationJobDeps;
  log: Logger;
  /** the scheduler runs a pass: a job ended, so a worker has room or builds became ready */
  wake(): void;
  /** where build samples go (buildStatistics.ts), and their time */
  statistics: { sql: Sql; now: () => Date };
  /** kiln_build_duration_seconds: the worker's own measure of each build; kiln_dispatch_latency_seconds of evaluations */
  metrics?: Pick<KilnMetrics, 'buildEnded' | 'jobDispatched'>;
  /** the stored phase samples (docs/metrics.md, "Stored metrics: job phases") */
  phases?: Pick<PhaseSampleBuffer, 'record'>;
}

export class WorkerMessageRouter {
  private readonly samples: BuildSampleWriter;

  constructor(private readonly deps: WorkerMessageRouterDeps) {
    this.samples = new BuildSampleWriter(deps.statistics.sql, deps.statistics.now);
  }

  received(worker: ConnectedWorker, message: Message): void {
    void this.route(worker, message).catch((error: unknown) => {
      this.deps.log.error({ err: error, worker: worker.hello.workerId, message: message.t }, 'handling a worker message failed');
    });
  }

  /** A cluster job's build whose job the cluster placement ended (the attempt aborted): its log ends, the build goes back to the queue. */
  async requeueEnded(job: BuildJobEntry): Promise<void> {
    await this.deps.logs.finish(job.derivationBuildId, job.attempt).catch(() => undefined);
    // an attempt spent (the ledger's, attemptScopes.ts): counted on its worker's scope
    await this.deps.outcomes.abortedAttempt(job.derivationBuildId, job.attempt);
    await this.requeue(job, 'refused');
  }

  /** The worker's connection is gone: its jobs go back to the queue. */
  lost(worker: ConnectedWorker, code: RejectCode, reason: string): void {
    const { jobs, nars, cancellations, logs, log } = this.deps;
    const mine = jobs.ofWorker(worker.hello.workerId);
    log.info({ worker: worker.hello.workerId, code, reason, jobs: mine.length }, 'worker lost; re-queueing its jobs');
    this.deps.changeJobs.lost(worker.hello.workerId);
    void (async () => {
      await nars.lost(worker);
      // one job's failure to re-queue must not leave the others started with no job behind them
      for (const job of mine) await this.lostJob(worker, job).catch((error: unknown) => log.error({ err: error, job: job.jobId }, 're-queueing a lost worker\'s job failed'));
      this.deps.wake();
    })().catch((error: unknown) => log.error({ err: error }, 're-queueing a lost worker\'s jobs failed'));
  }

  private async lostJob(worker: ConnectedWorker, job: Job): Promise<void> {
    const { jobs, cancellations, logs } = this.deps;
    const cancelled = cancellations.forget(job);
    if (!jobs.end(job, { type: 'lost' })) return;
    if (job.kind === 'build') await logs.finish(job.derivationBuildId, job.attempt).catch(() => undefined);
    // A cancelled build was aborted already (and may since run for another evaluation): nothing to re-queue.
    if (cancelled && job.kind === 'build') return;
    // A worker's disconnect is not the build's failure: a job that never began there spends no
    // attempt (counted with the declines); one that began may have taken the worker down with it.
    // Like a decline, it pauses the build for that worker, so one that takes it, hangs up and
    // comes back cannot churn the build's rows and events as fast as it reconnects.
    const forgiven = job.kind === 'build' && !job.begun;
    if (forgiven) this.deps.placement.declines.declined(job.derivationBuildId, worker.hello.workerId);
    if (job.kind === 'build' && !forgiven) {
      // the last attempt's loss fails the build: one that takes every worker down must not loop for ever
      const outcome = await this.deps.outcomes.lostWhileBuilding(job.derivationBuildId, job.attempt);
      // (a failure's dependents and evaluations are finished by failed() itself)
      if (outcome === 'failed') await endRunningReading(this.deps.statistics.sql, job.derivationBuildId, job.attempt);
      if (outcome !== 'requeue') return;
    }
    await this.requeue(job, 'lost', forgiven);
  }

  /** `declined`: a dispatch that spends no attempt (the row counts it in declines): the worker declined it, or was lost before it began. */
  private async requeue(job: Job, why: 'lost' | 'refused', declined = false): Promise<void> {
    if (job.kind === 'eval') {
      await changePhase(this.deps.events, job.evaluationId, { event: { type: 'requeue', why }, workerId: null });
      return;
    }
    await this.deps.outcomes.setStatus(job.derivationBuildId, { event: { type: 'requeue', why }, workerId: null, declined });
    await endRunningReading(this.deps.statistics.sql, job.derivationBuildId, job.attempt);
  }

  private async route(worker: ConnectedWorker, message: Message): Promise<void> {
    const { nars, jobs } = this.deps;
    switch (message.t) {
      case 'narPushStart': {
        const job = jobs.get(message.jobId);
        if (job?.kind === 'build' && job.workerId === worker.hello.workerId) {
          job.begun = true;
          jobs.reportProgress(job, 'uploading', message.info.narSize, 1);
        }
        return nars.start(worker, message, jobs.writableFor(worker));
      }
      case 'narChunk': return nars.chunk(worker, message);
      case 'narPushEnd': return nars.end(worker, message);
      case 'narAbort': return nars.abort(worker, message.transferId);
      case 'heartbeat': return this.readings(worker, message);
      case 'pushResult': case 'error': return;
      default:
    }
    if (!('jobId' in message) || message.jobId === undefined) return;
    if (this.deps.changeJobs.received(worker, message)) return;
    // a cluster job's members of rank ≥ 1 answer to the cluster placement; rank 0's acceptance is noted there too
    if (this.deps.placement.cluster.received(worker, message)) return;
    const job = jobs.get(message.jobId);
    if (!job || job.workerId !== worker.hello.workerId) return;
    if (message.t === 'jobAccepted') return this.accepted(job);
    if (message.t === 'jobRefused') return this.refused(worker, job);
    if (job.kind === 'eval') return evaluationJobMessage(this.deps.evaluationJobs, job, message, worker);
    return this.buildMessage(job, message);
  }

  /** A heartbeat's readings of running builds, for the builds this process gave that worker. */
  private async readings(worker: ConnectedWorker, message: Extract<Message, { t: 'heartbeat' }>): Promise<void> {
    // One reading per job (the last): a heartbeat listing the same job a thousand times is one upsert.
    const latest = new Map((message.builds ?? []).map((r) => [r.jobId, r]));
    const samples = [...latest.values()].flatMap((r) => {
      const job = this.deps.jobs.get(r.jobId);
      if (job?.kind !== 'build' || job.workerId !== worker.hello.workerId) return [];
      // what the build holds now, for placement's memory reservations
      if (r.peakMemoryBytes !== null) job.memory.reported = r.peakMemoryBytes;
      const resources = {
        cpuUserSeconds: r.cpuUserSeconds, cpuSystemSeconds: r.cpuSystemSeconds, peakMemoryBytes: r.peakMemoryBytes,
        ioReadBytes: r.ioReadBytes, ioWriteBytes: r.ioWriteBytes, oomKills: r.oomKills,
      };
      return [{ derivationBuildId: job.derivationBuildId, attempt: job.attempt, workerId: job.workerId, wallMs: Math.round(r.wallSeconds * 1000), resources }];
    });
    if (samples.length > 0) await recordBuildReadings(this.deps.statistics.sql, samples, this.deps.statistics.now());
  }

  /**
   * A worker took the job. An evaluation's dispatch latency ends here: from the moment it became
   * dispatchable (entered queued) to a worker taking it (a build's ends at its dispatch, buildPlacement.ts).
   */
  private accepted(job: Job): void {
    job.actor.send({ type: 'accepted' });
    if (job.kind === 'build') {
      job.taken = true;
      return;
    }
    const waited = Math.max(0, (this.deps.statistics.now().getTime() - job.queuedAt.getTime()) / 1000);
    this.deps.metrics?.jobDispatched('evaluation', waited);
    this.deps.phases?.record('evaluation', 'dispatch', waited);
  }

  /**
   * The worker refused the job, or gave back one it had taken. A build's is a decline
   * (buildDeclines.ts): no attempt spent (the row's declines count it), and the build is not offered
   * to that worker for a while. A refusal of a build not taken, and of any evaluation job, pauses the
   * whole worker too (it is busy or cannot take jobs); a build's give-back does not: only that build
   * cannot go there now. What a give-back's build logged so far is stored, as for a lost job.
   */
  private async refused(worker: ConnectedWorker, job: Job): Promise<void> {
    if (!this.deps.jobs.end(job, { type: 'refused' })) return;
    if (job.kind === 'eval' || !job.taken) this.deps.placement.refused(worker.hello.workerId);
    if (job.kind === 'eval') return this.requeue(job, 'refused');
    const { count, pauseMs } = this.deps.placement.declines.declined(job.derivationBuildId, worker.hello.workerId);
    if (count === DECLINES_TO_CAP) {
      this.deps.log.warn({ worker: worker.hello.workerId, derivationBuild: job.derivationBuildId, declines: count, pauseMs },
        'a worker keeps declining a build: it is offered to that worker once per pause from now on');
    }
    await this.deps.logs.finish(job.derivationBuildId, job.attempt)
      .catch((error: unknown) => this.deps.log.error({ err: error }, 'storing a build log failed'));
    await this.requeue(job, 'refused', true);
  }

  private async buildMessage(job: BuildJobEntry, message: Message): Promise<void> {
    const { logs, jobs, outcomes } = this.deps;
    if (message.t === 'buildLog') {
      job.begun = true;
      job.actor.send({ type: 'progress', amount: message.data.length });
      jobs.reportProgress(job, 'building', message.data.length, 0);
      return logs.append(job.derivationBuildId, job.attempt, message.data);
    }
    if (message.t !== 'buildResult' && message.t !== 'jobFailed') return;
    if (await this.deps.cancellations.answered(job)) {
      this.deps.wake();
      return;
    }
    if (!jobs.end(job, message.t === 'buildResult' ? { type: 'succeeded' } : { type: 'failed', reason: message.failure.reason })) return;
    this.deps.placement.slotFreed();
    this.deps.metrics?.buildEnded(message.t === 'buildResult' ? 'completed' : 'failed', message.durationMs / 1000);
    this.deps.phases?.record('build', 'run', message.durationMs / 1000);
    const sample = { derivationBuildId: job.derivationBuildId, attempt: job.attempt, workerId: job.workerId, wallMs: message.durationMs, resources: message.resources ?? null };
    const peak = sample.resources?.peakMemoryBytes ?? null;
    if (peak !== null && job.memory.name !== null) this.deps.placement.peaks.learn(job.memory.name, peak);
    // the common case, batched: results that arrive together complete in one transaction, their
    // samples written in it; a failure's sample goes through the sample writer first
    const sampled = message.t === 'buildResult' ? null : this.samples.record(sample)
      .catch((error: unknown) => this.deps.log.warn({ err: error }, 'storing a build\'s resource sample failed'));
    const at = this.deps.statistics.now();
    await logs.finish(job.derivationBuildId, job.attempt).catch((error: unknown) => this.deps.log.error({ err: error }, 'storing a build log failed'));
    const logSizes = { logBytes: message.logBytes, logDroppedBytes: message.logDroppedBytes };
    const declines = this.deps.placement.declines;
    if (message.t === 'buildResult') {
      declines.forget(job.derivationBuildId);
      return outcomes.completeSoon(job.derivationBuildId, logSizes, { sample, at });
    }
    await sampled;
    await outcomes.failed(job.derivationBuildId, job.attempt, message.failure, logSizes);
    await outcomes.finishEvaluations({ derivationBuilds: [job.derivationBuildId] });
    this.deps.wake();
  }
}
