// The scheduler (docs/builds.md): hands queued evaluations to eval-capable workers and ready
// builds (every input built or substituted) to build workers whose architectures and system
// features fit, records what comes back, retries FailedTransient only, and re-queues the jobs of
// a worker that is lost. Every server process dispatches to the workers connected to it; the
// guarded status changes (queued → started) let exactly one process win a job. One process per
// database, the holder of a PostgreSQL advisory lock, also re-queues the jobs of processes that
// died (services/serverInstance.ts); the others retry the lock.
import type { Logger } from 'pino';
import type { ReservedSql, Sql } from 'postgres';
import type { Message, RejectCode } from '../protocol/index.js';
import type { Events } from '../storage/index.js';
import { CoalescingLoop, type Supervisor } from '../supervisors/index.js';
import { JobTable, type BuildJobEntry, type Job } from './schedulerJobs.js';
import type { BuildLogs } from './buildLogs.js';
import { BuildOutcomes } from './buildOutcomes.js';
import { buildJobMessage, targetCaches } from './buildJobMessage.js';
import { buildProgressReporter } from './buildProgress.js';
import { systemClock, type Clock } from './clock.js';
import { EvaluationProgress } from './evaluationProgress.js';
import { evaluationJobMessage, type EvaluationJobDeps } from './evaluationJobs.js';
import { changePhase } from './evaluationPhases.js';
import { JobCancellations } from './jobCancellations.js';
import { rankWorkers, type ScoringPolicy } from './workerRanking.js';
import type { CacheStorageLimits } from './cacheStorage.js';
import { evaluationWaitReason } from './evaluationWait.js';
import { outputsCached, projectCaches, readable, type ProjectCache } from './projectCaches.js';
import { queuedEvaluations, readyBuilds, requeueOrphanedJobs, type ReadyBuild } from './schedulerQueries.js';
import type { ConnectedWorker, WorkerConnections, WorkerListener } from './workerConnections.js';
import type { WorkerNars } from './workerNars.js';

const SCHEDULER_LOCK = 7_414_101;
const TICK_MS = 1000;
const REFUSAL_PAUSE_MS = 2000;
const ORPHAN_SWEEP_MS = 5000;

/**
 * Open mode is granted only to the local worker (services/workerAuth.ts), which serves every active
 * project, including those created after it connected.
 */
const serves = (worker: ConnectedWorker, projectId: string) => worker.open || worker.projects.includes(projectId);

/**
 * What runs the scheduler's periodic pass; the stop it returns ends it. The pass every second hides a
 * missing wake, so tests that check what wakes the scheduler (a subscription approval) hold it.
 */
export interface SchedulerTicker {
  start(tick: () => void, everyMs: number): () => void;
}

export const intervalTicker: SchedulerTicker = {
  start(tick, everyMs) {
    const timer = setInterval(tick, everyMs);
    timer.unref();
    return () => clearInterval(timer);
  },
};

export interface SchedulerSettings {
  maxAttempts: number;
  retryBackoffSecs: number;
  defaultTimeoutSecs: number;
  defaultMaxSilentSecs: number;
  inputsUnavailableMaxLoops: number;
  substituteMissEscalationThreshold: number;
  scoringPolicy: ScoringPolicy;
  /** cache.maxStorageGb: when non-zero, new evaluations wait while every writable cache is nearly full */
  maxStorageGb: number;
  /** substituter URLs are <serveUrl>/cache/<name> */
  serveUrl: string;
}

export interface BuildSchedulerDeps {
  sql: Sql;
  events: Events;
  workers: WorkerConnections;
  nars: WorkerNars;
  logs: BuildLogs;
  /** bytes left in caches, for the cache.maxStorageGb wait */
  storage: CacheStorageLimits;
  /** a read token for private caches (services/cacheReadTokens.ts), valid `ttlSecs` */
  readToken(cacheIds: readonly string[], ttlSecs: number): string;
  /** owns one job actor per dispatched job (actors/workerJob.ts) */
  supervisor: Supervisor;
  log: Logger;
  settings: SchedulerSettings;
  /** what retry backoffs are measured on (build.retryBackoffSecs); tests step it */
  clock: Clock;
  /** the periodic pass (default: every TICK_MS on a timer) */
  ticker?: SchedulerTicker;
}

export class BuildScheduler implements WorkerListener {
  private readonly jobs: JobTable;
  private readonly refusedUntil = new Map<string, number>();
  private readonly substitutionChecked = new Set<string>();
  private lock: ReservedSql | null = null;
  private readonly evaluationProgress: EvaluationProgress;
  private stopTicking: (() => void) | null = null;
  /** the scheduler's passes: never two at once, and a wake during one runs another after it */
  private readonly loop: CoalescingLoop;
  private sweptAt = 0;
  private readonly outcomes: BuildOutcomes;
  private readonly cancellations: JobCancellations;
  private readonly evaluationJobs: EvaluationJobDeps;

  constructor(private readonly deps: BuildSchedulerDeps) {
    this.loop = new CoalescingLoop(() => this.pass(), (error: unknown) => deps.log.error({ err: error }, 'a scheduler pass failed'));
    deps.supervisor.watch({ id: 'scheduler-loop', kind: 'scheduler-loop', inspect: () => this.loop.inspect() });
    const onError = (error: unknown) => deps.log.warn({ err: error }, 'publishing progress failed');
    this.evaluationProgress = new EvaluationProgress(deps.sql, deps.events, onError);
    const buildProgress = buildProgressReporter(deps.sql, deps.events, systemClock, onError);
    this.jobs = new JobTable(deps.supervisor, buildProgress, (id) => deps.workers.connected().find((w) => w.hello.workerId === id));
    const { maxAttempts, retryBackoffSecs, inputsUnavailableMaxLoops } = deps.settings;
    this.outcomes = new BuildOutcomes(deps.sql, deps.events, this.evaluationProgress, buildProgress, () => this.wake(), { maxAttempts, retryBackoffSecs, inputsUnavailableMaxLoops, clock: deps.clock });
    this.cancellations = new JobCancellations(deps.sql, this.jobs, deps.workers, deps.logs);
    this.evaluationJobs = {
      sql: deps.sql, events: deps.events, jobs: this.jobs, log: deps.log, maxAttempts,
      finishEvaluation: (evaluation) => this.outcomes.finishEvaluations({ evaluation }), wake: () => this.wake(),
    };
  }

  start(): void {
    this.stopTicking = (this.deps.ticker ?? intervalTicker).start(() => this.wake(), TICK_MS);
    this.wake();
  }

  async stop(): Promise<void> {
    this.stopTicking?.();
    await this.loop.stop();
    await this.outcomes.settle();
    await this.evaluationProgress.stop();
    if (this.lock) {
      await this.lock`select pg_advisory_unlock(${SCHEDULER_LOCK})`.catch(() => undefined);
      this.lock.release();
      this.lock = null;
    }
  }

  get isLeader(): boolean {
    return this.lock !== null;
  }

  /** Runs a pass soon; passes never overlap, and a wake during one runs another after it. */
  wake(): void {
    this.loop.wake();
  }

  /** Resolves once a pass that began after this call has ended (a test that stepped the clock waits for it). */
  async passNow(): Promise<void> {
    this.wake();
    await this.loop.settle();
  }

  /** onSubscriptionApproved: parked evaluations may now have their cache. */
  requeueWaiting(): void {
    this.wake();
  }

  /** The evaluation was aborted: stop its evaluation job if one runs; the next pass cancels its aborted builds. */
  cancelEvaluation(evaluationId: string): void {
    this.cancellations.cancelEvaluation(evaluationId);
    this.wake();
  }

  connected(): void {
    this.wake();
  }

  lost(worker: ConnectedWorker, code: RejectCode, reason: string): void {
    const mine = this.jobs.ofWorker(worker.hello.workerId);
    this.deps.log.info({ worker: worker.hello.workerId, code, reason, jobs: mine.length }, 'worker lost; re-queueing its jobs');
    void (async () => {
      await this.deps.nars.lost(worker);
      for (const job of mine) {
        this.cancellations.forget(job);
        if (!this.jobs.end(job, { type: 'lost' })) continue;
        if (job.kind === 'eval') await changePhase(this.deps.events, job.evaluationId, { event: { type: 'requeue', why: 'lost' }, workerId: null });
        else {
          await this.deps.logs.finish(job.derivationBuildId, job.attempt).catch(() => undefined);
          await this.outcomes.setStatus(job.derivationBuildId, { event: { type: 'requeue', why: 'lost' }, workerId: null });
        }
      }
      this.wake();
    })().catch((error: unknown) => this.deps.log.error({ err: error }, 're-queueing a lost worker\'s jobs failed'));
  }

  received(worker: ConnectedWorker, message: Message): void {
    void this.handle(worker, message).catch((error: unknown) => {
      this.deps.log.error({ err: error, worker: worker.hello.workerId, message: message.t }, 'handling a worker message failed');
    });
  }

  private async handle(worker: ConnectedWorker, message: Message): Promise<void> {
    const { nars } = this.deps;
    switch (message.t) {
      case 'narPushStart': {
        const job = this.jobs.get(message.jobId);
        if (job?.kind === 'build' && job.workerId === worker.hello.workerId) this.jobs.reportProgress(job, 'uploading', message.info.narSize, 1);
        return nars.start(worker, message, this.jobs.writableFor(worker));
      }
      case 'narChunk': return nars.chunk(worker, message);
      case 'narPushEnd': return nars.end(worker, message);
      case 'narAbort': return nars.abort(worker, message.transferId);
      case 'heartbeat': case 'pushResult': case 'error': return;
      default:
    }
    if (!('jobId' in message) || message.jobId === undefined) return;
    const job = this.jobs.get(message.jobId);
    if (!job || job.workerId !== worker.hello.workerId) return;
    if (message.t === 'jobAccepted') return job.actor.send({ type: 'accepted' });
    if (message.t === 'jobRefused') return this.refused(worker, job);
    if (job.kind === 'eval') return evaluationJobMessage(this.evaluationJobs, job, message);
    return this.buildMessage(job, message);
  }

  private async refused(worker: ConnectedWorker, job: Job): Promise<void> {
    if (!this.jobs.end(job, { type: 'refused' })) return;
    this.refusedUntil.set(worker.hello.workerId, Date.now() + REFUSAL_PAUSE_MS);
    if (job.kind === 'eval') await changePhase(this.deps.events, job.evaluationId, { event: { type: 'requeue', why: 'refused' }, workerId: null });
    else await this.outcomes.setStatus(job.derivationBuildId, { event: { type: 'requeue', why: 'refused' }, workerId: null });
  }

  private async buildMessage(job: BuildJobEntry, message: Message): Promise<void> {
    const { logs, settings } = this.deps;
    if (message.t === 'buildLog') {
      job.actor.send({ type: 'progress', amount: message.data.length });
      this.jobs.reportProgress(job, 'building', message.data.length, 0);
      return logs.append(job.derivationBuildId, job.attempt, message.data);
    }
    if (message.t !== 'buildResult' && message.t !== 'jobFailed') return;
    if (await this.cancellations.answered(job)) {
      this.wake();
      return;
    }
    if (!this.jobs.end(job, message.t === 'buildResult' ? { type: 'succeeded' } : { type: 'failed', reason: message.failure.reason })) return;
    await logs.finish(job.derivationBuildId, job.attempt).catch((error: unknown) => this.deps.log.error({ err: error }, 'storing a build log failed'));
    const logSizes = { logBytes: message.logBytes, logDroppedBytes: message.logDroppedBytes };
    if (message.t === 'buildResult') {
      // the common case, batched: results that arrive together complete in one transaction
      return this.outcomes.completeSoon(job.derivationBuildId, logSizes);
    } else {
      const requeued = await this.outcomes.failed(job.derivationBuildId, job.attempt, message.failure, logSizes);
      for (const id of requeued) this.substitutionChecked.delete(id);
    }
    await this.outcomes.finishEvaluations({ derivationBuilds: [job.derivationBuildId] });
    this.wake();
  }

  private async pass(): Promise<void> {
    const leader = await this.lead();
    if (leader && Date.now() - this.sweptAt >= ORPHAN_SWEEP_MS) {
      this.sweptAt = Date.now();
      const requeued = await requeueOrphanedJobs(this.deps.events);
      if (requeued > 0) this.deps.log.info({ jobs: requeued }, 're-queued the jobs of server processes that are gone');
    }
    if (!leader && this.deps.workers.connected().length === 0) return;
    await this.cancellations.cancelAbortedJobs();
    await this.dispatchEvaluations();
    await this.dispatchBuilds();
  }

  private async lead(): Promise<boolean> {
    if (this.lock) return true;
    const reserved = await this.deps.sql.reserve();
    const [row] = await reserved<{ locked: boolean }[]>`select pg_try_advisory_lock(${SCHEDULER_LOCK}) as locked`;
    if (!row?.locked) {
      reserved.release();
      return false;
    }
    this.lock = reserved;
    this.sweptAt = 0;
    return true;
  }

  private available(worker: ConnectedWorker): boolean {
    return (this.refusedUntil.get(worker.hello.workerId) ?? 0) <= Date.now();
  }

  private async dispatchEvaluations(): Promise<void> {
    const { sql, events, workers } = this.deps;
    for (const waiting of await queuedEvaluations(sql, 'waiting')) {
      if ((await evaluationWaitReason(this.deps.sql, this.deps.storage, this.deps.settings.maxStorageGb, waiting.project_id)) === null) await changePhase(events, waiting.id, { event: { type: 'requeue', why: 'room' } });
    }
    for (const evaluation of await queuedEvaluations(sql, 'queued')) {
      const reason = await evaluationWaitReason(this.deps.sql, this.deps.storage, this.deps.settings.maxStorageGb, evaluation.project_id);
      if (reason !== null) {
        await changePhase(events, evaluation.id, { event: { type: 'wait' }, reason });
        continue;
      }
      const worker = workers.connected().find((w) =>
        w.hello.capabilities.eval && serves(w, evaluation.project_id) && this.available(w) && this.jobs.running(w, 'eval') < w.hello.maxConcurrentEvals);
      if (!worker) continue;
      const jobId = `eval:${evaluation.id}:${evaluation.attempts + 1}`;
      if (!(await changePhase(events, evaluation.id, { event: { type: 'dispatch' }, workerId: worker.hello.workerId }))) continue;
      this.jobs.add({ kind: 'eval', jobId, workerId: worker.hello.workerId, evaluationId: evaluation.id, attempt: evaluation.attempts + 1 }, worker);
      worker.link.send({ t: 'evalJob', jobId, project: evaluation.project_id, repository: evaluation.repository, commit: evaluation.commit, attributes: evaluation.wildcard, timeoutSecs: 0 });
      events.publish('worker.job_dispatched', { worker: worker.hello.workerId, job_id: evaluation.id, kind: 'evaluation', evaluation_id: evaluation.id });
    }
  }

  private async dispatchBuilds(): Promise<void> {
    const { sql, workers } = this.deps;
    const candidates = workers.connected().filter((w) => w.hello.capabilities.build && this.available(w));
    if (candidates.length === 0) return;
    const caches = new Map<string, ProjectCache[]>();
    const cachesOf = async (projectId: string) => {
      let found = caches.get(projectId);
      if (!found) caches.set(projectId, (found = await projectCaches(sql, projectId)));
      return found;
    };
    const assignments: { worker: ConnectedWorker; build: ReadyBuild; caches: ProjectCache[] }[] = [];
    // builds this pass gives each worker, on top of what it runs
    const planned = new Map<ConnectedWorker, number>();
    for (const build of await readyBuilds(sql, 500, this.deps.clock.now())) {
      const outputs = Object.values(build.outputs).filter((p): p is string => p !== null);
      let substituted = false;
      // A build is looked up in the caches once when it becomes ready, not on every pass while it waits for a worker.
      // Past build.substituteMissEscalationThreshold misses, the cache's claim is no longer believed.
      const unchecked = !this.substitutionChecked.has(build.id) && build.substitute_misses < this.deps.settings.substituteMissEscalationThreshold;
      this.substitutionChecked.add(build.id);
      if (this.substitutionChecked.size > 200_000) this.substitutionChecked.clear();
      for (const project of unchecked ? build.projects : []) {
        if (await outputsCached(sql, outputs, readable(await cachesOf(project)))) {
          substituted = (await this.outcomes.setStatus(build.id, { event: { type: 'substitute' } })) !== null;
          break;
        }
      }
      if (substituted) {
        await this.outcomes.finishEvaluations({ derivationBuilds: [build.id] });
        this.wake();
        continue;
      }
      const worker = this.pickWorker(candidates, build, planned);
      if (!worker) continue;
      const caches = await cachesOf(build.projects.find((p) => serves(worker, p))!);
      if (targetCaches(caches).length === 0) continue;
      planned.set(worker, (planned.get(worker) ?? 0) + 1);
      assignments.push({ worker, build, caches });
    }
    await this.startBuilds(assignments);
  }

  private pickWorker(candidates: ConnectedWorker[], build: ReadyBuild, planned: ReadonlyMap<ConnectedWorker, number>): ConnectedWorker | undefined {
    const busy = (w: ConnectedWorker) => this.jobs.running(w, 'build') + (planned.get(w) ?? 0);
    const fits = candidates.filter((w) =>
      (build.system === 'builtin' || w.hello.architectures.includes(build.system))
      && build.required_features.every((f) => w.hello.systemFeatures.includes(f))
      && build.projects.some((p) => serves(w, p))
      && busy(w) < w.hello.maxConcurrentBuilds);
    return rankWorkers(this.deps.settings.scoringPolicy, fits, { preferLocalBuild: build.prefer_local_build }, busy)[0];
  }

  /** Starts a pass's builds in one transaction (one commit, not one per build), then sends the jobs. */
  private async startBuilds(assignments: readonly { worker: ConnectedWorker; build: ReadyBuild; caches: ProjectCache[] }[]): Promise<void> {
    const { events, settings } = this.deps;
    const attempts = await this.outcomes.startAll(assignments.map(({ worker, build }) => ({ id: build.id, workerId: worker.hello.workerId })));
    assignments.forEach(({ worker, build, caches }, i) => {
      const attempt = attempts[i];
      if (attempt === null || attempt === undefined) return;
      const jobId = `build:${build.id}:${attempt}`;
      this.jobs.add({ kind: 'build', jobId, workerId: worker.hello.workerId, derivationBuildId: build.id, attempt, targetCaches: new Set(targetCaches(caches)) }, worker);
      worker.link.send(buildJobMessage(jobId, build, caches, { ...settings, readToken: this.deps.readToken }));
      events.publish('worker.job_dispatched', { worker: worker.hello.workerId, job_id: build.id, kind: 'build', build_id: build.id });
    });
  }
}
