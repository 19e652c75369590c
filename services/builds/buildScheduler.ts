// The scheduler (docs/builds.md): hands queued evaluations to eval-capable workers and ready
// builds to build workers that fit (buildPlacement.ts), records what comes back
// (workerMessageRouter.ts; what a failure leads to is the lifecycle's decision,
// actors/lifecycles.ts), and re-queues the jobs of a worker that is lost. Every server process
// dispatches to the workers connected to it; the guarded status changes (queued → started) let
// exactly one process win a job. One process per database leads (schedulerLeadership.ts) and
// re-queues the jobs of processes that died. This file runs the passes and wires the parts.
import type { StageTracer } from '../../config/index.js';
import type { Logger } from 'pino';
import type { Sql } from 'postgres';
import type { Message, RejectCode } from '../../protocol/index.js';
import type { Events, KilnMetrics, PhaseSampleBuffer } from '../../storage/index.js';
import { CoalescingLoop, systemClock, type Clock, type Supervisor } from '../../supervisors/index.js';
import { JobTable } from './schedulerJobs.js';
import type { BuildLogs } from './buildLogs.js';
import { BuildOutcomes } from './buildOutcomes.js';
import { BuildPlacement, type PlacementSettings, type PrivateFetchLookup } from './buildPlacement.js';
import { buildProgressReporter } from './buildProgress.js';
import { EvaluationProgress } from './evaluationProgress.js';
import { JobCancellations } from './jobCancellations.js';
import type { CacheStorageLimits } from '../caches/index.js';
import { PlannerStatistics } from './plannerStatistics.js';
import { QueueDepthReporter } from './queueDepth.js';
import { ReadyQueue } from './readyQueue.js';
import { SchedulerLeadership } from './schedulerLeadership.js';
import type { ConnectedWorker, WorkerConnections, WorkerListener, WorkerNars } from '../workers/index.js';
import { ChangeJobs } from './changeJobs.js';
import { WorkerMessageRouter } from './workerMessageRouter.js';

const TICK_MS = 1000;
/** Builds a pass places at most (the ready queue's length). */
const PASS_BUILDS = 500;

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

export interface SchedulerSettings extends PlacementSettings {
  maxAttempts: number;
  retryBackoffSecs: number;
  inputsUnavailableMaxLoops: number;
}

export interface BuildSchedulerDeps {
  sql: Sql;
  events: Events;
  workers: WorkerConnections;
  nars: WorkerNars;
  logs: BuildLogs;
  /** bytes left in caches, for the cache.maxStorageGb wait */
  storage: CacheStorageLimits;
  /** a read token for private caches (services/caches/cacheReadTokens.ts), valid `ttlSecs` */
  readToken(cacheIds: readonly string[], ttlSecs: number): string;
  /** owns one job actor per dispatched job (actors/workerJob.ts) */
  supervisor: Supervisor;
  log: Logger;
  settings: SchedulerSettings;
  /** what retry backoffs are measured on (build.retryBackoffSecs); tests step it */
  clock: Clock;
  /** the periodic pass (default: every TICK_MS on a timer) */
  ticker?: SchedulerTicker;
  /** kiln_build_duration_seconds and kiln_dispatch_latency_seconds */
  metrics?: Pick<KilnMetrics, 'buildEnded' | 'jobDispatched'>;
  /** the stored phase samples: dispatch latency and job time of builds and evaluations (docs/metrics.md) */
  phases?: Pick<PhaseSampleBuffer, 'record'>;
  /** private repositories of the Git host application (services/gitHosts repositoryAccess) */
  privateFetch?: PrivateFetchLookup;
  /** log.traceDir: each job's span (docs/metrics.md, "Stage traces") */
  tracer?: StageTracer;
  /** how long a change job (open_pr) may take before it fails (default 30 minutes) */
  changeJobTimeoutMs?: number;
}

export class BuildScheduler implements WorkerListener {
  private readonly evaluationProgress: EvaluationProgress;
  private stopTicking: (() => void) | null = null;
  /** the scheduler's passes: never two at once, and a wake during one runs another after it */
  private readonly loop: CoalescingLoop;
  /** a wake() since the last full pass: a pass woken only by the build cycle (a freed slot, a completion) places builds only */
  private fullPassDue = true;
  private readonly outcomes: BuildOutcomes;
  private readonly cancellations: JobCancellations;
  private readonly leadership: SchedulerLeadership;
  private readonly placement: BuildPlacement;
  private readonly router: WorkerMessageRouter;
  private readonly queueDepth: QueueDepthReporter;
  private readonly ready: ReadyQueue;
  /** changeJobs (the open_pr action) given to this process's workers */
  readonly changeJobs: ChangeJobs;

  constructor(private readonly deps: BuildSchedulerDeps) {
    const { sql, events, workers, log, settings, clock } = deps;
    this.loop = new CoalescingLoop(() => this.pass(), (error: unknown) => log.error({ err: error }, 'a scheduler pass failed'));
    deps.supervisor.watch({ id: 'scheduler-loop', kind: 'scheduler-loop', inspect: () => this.loop.inspect() });
    const onError = (error: unknown) => log.warn({ err: error }, 'publishing progress failed');
    this.evaluationProgress = new EvaluationProgress(sql, events, onError);
    const buildProgress = buildProgressReporter(sql, events, systemClock, onError);
    const jobs = new JobTable(deps.supervisor, buildProgress, deps.tracer);
    const { maxAttempts, retryBackoffSecs, inputsUnavailableMaxLoops } = settings;
    this.ready = new ReadyQueue(sql, clock, PASS_BUILDS);
    const passSoon = () => this.loop.wake(); // builds only (issue 23): no evaluation query per finished build
    this.outcomes = new BuildOutcomes(sql, events, this.evaluationProgress, buildProgress, passSoon, { maxAttempts, retryBackoffSecs, inputsUnavailableMaxLoops, clock }, (builds) => this.ready.add(builds));
    this.cancellations = new JobCancellations(sql, jobs, workers, deps.logs);
    this.leadership = new SchedulerLeadership(sql, events, log);
    this.queueDepth = new QueueDepthReporter(sql, events);
    this.placement = new BuildPlacement({ sql, events, workers, jobs, outcomes: this.outcomes, ready: this.ready, storage: deps.storage, readToken: deps.readToken, settings, clock, wake: passSoon, log,
      requeue: (job) => this.router.requeueEnded(job), ...(deps.metrics ? { metrics: deps.metrics } : {}), ...(deps.phases ? { phases: deps.phases } : {}),
      ...(deps.privateFetch ? { privateFetch: deps.privateFetch } : {}) });
    this.changeJobs = new ChangeJobs(workers, deps.changeJobTimeoutMs);
    this.router = new WorkerMessageRouter({
      changeJobs: this.changeJobs, ...(deps.metrics ? { metrics: deps.metrics } : {}), ...(deps.phases ? { phases: deps.phases } : {}),
      statistics: { sql, now: () => clock.now() },
      events, jobs, nars: deps.nars, logs: deps.logs, outcomes: this.outcomes, cancellations: this.cancellations, placement: this.placement, log, wake: () => this.wake(),
      evaluationJobs: { sql, events, jobs, log, maxAttempts, finishEvaluation: (evaluation) => this.outcomes.finishEvaluations({ evaluation }), wake: () => this.wake(), statistics: new PlannerStatistics(sql, log), ...(deps.phases ? { phases: deps.phases } : {}) },
    });
  }

  start(): void {
    this.stopTicking = (this.deps.ticker ?? intervalTicker).start(() => this.wake(), TICK_MS);
    this.wake();
  }

  async stop(): Promise<void> {
    this.stopTicking?.();
    await this.loop.stop();
    await Promise.all([this.placement.settle(), this.outcomes.settle()]);
    await this.evaluationProgress.stop();
    await this.leadership.release();
  }

  get isLeader(): boolean {
    return this.leadership.isLeader;
  }

  /**
   * Runs a full pass soon (evaluations, aborted jobs' cancels, builds); passes never overlap, and a
   * wake during one runs another after it. Whatever woke it may have changed the queue in ways only
   * the database knows (a recording, a re-queue, another process's work, the periodic tick), so the
   * pass reads the ready queue afresh.
   */
  wake(): void {
    this.ready.invalidate();
    this.fullPassDue = true;
    this.loop.wake();
  }

  /** Resolves once a pass that began after this call has ended and its jobs were sent (a test that stepped the clock waits for it). */
  async passNow(): Promise<void> {
    this.wake();
    await this.loop.settle().then(() => this.placement.settle());
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

  connected(): void { this.wake(); }

  lost(worker: ConnectedWorker, code: RejectCode, reason: string): void {
    this.router.lost(worker, code, reason);
  }

  received(worker: ConnectedWorker, message: Message): void {
    this.router.received(worker, message);
  }

  private async pass(): Promise<void> {
    const leader = await this.leadership.pass();
    if (!leader && this.deps.workers.connected().length === 0) return;
    const full = this.fullPassDue;
    // Independent parts, at once: the pass waits for the slowest round trips, not for their sum.
    this.fullPassDue = false;
    const parts = await Promise.allSettled([this.placement.dispatchBuilds(full), ...(full ? [this.cancellations.cancelAbortedJobs(), this.placement.dispatchEvaluations()] : [])]);
    for (const part of parts) if (part.status === 'rejected') throw part.reason;
    // Restores on full passes only (a wake or the tick): per build-cycle pass it was a dispatch's most frequent read (issue 23).
    if (leader) await Promise.all([this.queueDepth.report(), ...(full ? [this.outcomes.restoreAbandoned().then((restored) => restored.length > 0 && this.wake())] : [])]);
  }
}
