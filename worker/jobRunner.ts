// Takes jobs from a connection, admits them within the worker's capacity and capabilities, runs
// them, and cancels them on cancelJob or when the connection ends. Jobs are tied to the
// connection they came on: when it closes the server re-queues them (after its heartbeat timeout
// at the latest), so the worker stops them rather than finishing work nobody will collect.
import { join } from 'node:path';
import { BuildReadings } from './buildReadings.js';
import { disabledTracer, type Logger, type StageTracer } from '../config/index.js';
import { jobFailure, type BuildJob, type ChangeJob, type EvalJob, type Message, type PushJob } from '../protocol/index.js';
import { runChangeJob } from './changeJob.js';
import { runBuildJob } from './buildJob.js';
import { BatchCredit } from './batchCredit.js';
import { holdClusterSlot } from './clusterMember.js';
import type { ProtoConnection } from './connection.js';
import { runEvalJob } from './evalJob.js';
import type { JobContext } from './jobContext.js';
import { NarPusher } from './narPusher.js';
import { ownStoreCollector, type OwnStoreCollector } from './ownStoreCollector.js';
import { runPushJob } from './pushJob.js';
import type { WorkerSettings } from './settings.js';
import { StoreTrust } from './storeTrust.js';

type Job = EvalJob | BuildJob | PushJob | ChangeJob;
type Kind = 'eval' | 'build' | 'push' | 'change';

interface Running {
  kind: Kind;
  abort: AbortController;
  done: Promise<void>;
  batchCredit: BatchCredit;
}

const KINDS = { evalJob: 'eval', buildJob: 'build', pushJob: 'push', changeJob: 'change' } as const satisfies Record<Job['t'], Kind>;
const kindOf = (job: Job): Kind => KINDS[job.t];

export class JobRunner {
  private readonly running = new Map<string, Running>();
  /** worker.storeRoot's bound: builds run under it, and it collects the store between them */
  readonly collector: OwnStoreCollector | null;
  private storeTrust: Promise<StoreTrust> | undefined;

  constructor(
    private readonly settings: WorkerSettings,
    private readonly logs: { eval: Logger; build: Logger },
    private readonly tracer: StageTracer = disabledTracer,
    /** the running builds' readings the heartbeats carry */
    readonly readings: BuildReadings = new BuildReadings(),
  ) {
    this.collector = ownStoreCollector(settings, logs.build);
  }

  count(kind: Kind): number {
    return [...this.running.values()].filter((job) => job.kind === kind).length;
  }

  /** Serves jobs from `connection` until it closes. */
  attach(connection: ProtoConnection): void {
    const limits = connection.welcome.limits;
    const pusher = new NarPusher(connection, Math.min(this.settings.narChunkBytes, limits.narChunkBytes), limits.narSendChunkTimeoutSecs, this.settings.storeRoot);
    const mine = new Set<string>();
    connection.onMessage((message) => this.receive(message, connection, pusher, mine));
    void connection.closed.then(() => {
      pusher.failAll('the /proto connection closed');
      for (const jobId of mine) this.running.get(jobId)?.abort.abort();
    });
  }

  private receive(message: Message, connection: ProtoConnection, pusher: NarPusher, mine: Set<string>): void {
    if (pusher.handle(message)) return;
    if (message.t === 'cancelJob') {
      const job = this.running.get(message.jobId);
      if (job) job.abort.abort();
      else connection.send({ t: 'error', code: 'unknown_job', message: `no running job ${message.jobId}`, jobId: message.jobId });
      return;
    }
    if (message.t === 'evalCredit') {
      this.running.get(message.jobId)?.batchCredit.grant(message.batches);
      return;
    }
    if (message.t === 'error') {
      this.logs.build.warn({ code: message.code, jobId: message.jobId }, `the server reports: ${message.message}`);
      return;
    }
    if (message.t !== 'evalJob' && message.t !== 'buildJob' && message.t !== 'pushJob' && message.t !== 'changeJob') return;
    const refusal = this.refusal(message);
    if (refusal) {
      connection.send({ t: 'jobRefused', jobId: message.jobId, refusal: refusal.refusal, message: refusal.message });
      return;
    }
    connection.send({ t: 'jobAccepted', jobId: message.jobId });
    const abort = new AbortController();
    const kind = kindOf(message);
    const batchCredit = new BatchCredit();
    const ctx: JobContext = {
      connection, pusher, settings: this.settings, log: kind === 'eval' ? this.logs.eval : this.logs.build, signal: abort.signal, tracer: this.tracer, readings: this.readings, batchCredit,
      trust: () => (this.storeTrust ??= StoreTrust.open(join(this.settings.baseDir, 'built-paths.jsonl'), { env: this.settings.childEnv })),
    };
    const done = this.run(message, ctx).finally(() => {
      this.running.delete(message.jobId);
      mine.delete(message.jobId);
    });
    mine.add(message.jobId);
    this.running.set(message.jobId, { kind, abort, done, batchCredit });
  }

  private refusal(job: Job): { refusal: 'busy' | 'unsupported' | 'duplicate'; message: string } | undefined {
    if (this.running.has(job.jobId)) return { refusal: 'duplicate', message: `job ${job.jobId} is already running here` };
    const { capabilities: caps } = this.settings;
    const kind = kindOf(job);
    if (kind === 'eval' && !caps.eval) return { refusal: 'unsupported', message: 'this worker does not evaluate (worker.capabilities.eval)' };
    if (kind === 'change' && !caps.eval) return { refusal: 'unsupported', message: 'an open_pr change runs on an evaluating worker (worker.capabilities.eval)' };
    if (kind === 'build' && !caps.build) return { refusal: 'unsupported', message: 'this worker does not build (worker.capabilities.build)' };
    if (kind === 'eval' && this.count('eval') >= this.settings.maxConcurrentEvals) {
      return { refusal: 'busy', message: `already running ${this.settings.maxConcurrentEvals} evaluation(s) (worker.eval.maxConcurrent)` };
    }
    if (kind === 'build' && this.count('build') >= this.settings.maxConcurrentBuilds) {
      return { refusal: 'busy', message: `already running ${this.settings.maxConcurrentBuilds} build(s) (worker.build.maxConcurrent)` };
    }
    return undefined;
  }

  private async run(job: Job, ctx: JobContext): Promise<void> {
    const started = Date.now();
    try {
      if (job.t === 'evalJob') await runEvalJob(job, ctx);
      else if (job.t === 'buildJob' && (job.cluster?.rank ?? 0) > 0) await holdClusterSlot(job, ctx);
      else if (job.t === 'buildJob' && this.collector) await this.collector.hold(() => runBuildJob(job, ctx));
      else if (job.t === 'buildJob') await runBuildJob(job, ctx);
      else if (job.t === 'pushJob') await runPushJob(job, ctx);
      else await runChangeJob(job, ctx);
    } catch (e) {
      // A fault of the worker itself (a spawn that failed, a full scratch disk): retryable.
      ctx.log.error({ err: e, jobId: job.jobId }, 'job crashed');
      const failure = ctx.signal.aborted ? jobFailure('cancelled', 'the job was cancelled') : jobFailure('worker_error', e instanceof Error ? e.message : String(e));
      ctx.connection.send({ t: 'jobFailed', jobId: job.jobId, failure, durationMs: Date.now() - started, logBytes: 0, logDroppedBytes: 0 });
    }
  }

  /** Cancels every job and waits for them to end. */
  async stop(): Promise<void> {
    for (const job of this.running.values()) job.abort.abort();
    await Promise.allSettled([...this.running.values()].map((job) => job.done));
  }
}
