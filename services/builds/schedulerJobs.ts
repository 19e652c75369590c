// The jobs this server process has handed to its workers: one job actor each (actors/workerJob.ts)
// under the scheduler's supervisor, looked up by job id and by worker. The rows say what is
// queued or done; this table says who is doing what right now.
import { summarizeWorkerJob, workerJobMachine, type WorkerJobContext, type WorkerJobEvent, type WorkerJobInput, type WorkerJobState } from '../../actors/index.js';
import type { LightActor, Supervisor } from '../../supervisors/index.js';
import type { BuildProgressReporter } from './buildProgress.js';
import type { ConnectedWorker } from '../workers/index.js';
import { disabledTracer, type EndSpan, type StageTracer } from '../../config/index.js';
import { EVAL_BATCH_WINDOW, jobRootSpan } from '../../protocol/index.js';

export type JobActor = LightActor<WorkerJobState, WorkerJobEvent, WorkerJobContext, WorkerJobInput>;
export type EvalJobEntry = {
  kind: 'eval'; jobId: string; workerId: string; evaluationId: string; chain: Promise<unknown>; actor: JobActor;
  /** why the graph cannot be recorded whole (the evaluation fails at its result); null while it can */
  failure: { reason: 'server_error' | 'worker_error'; message: string } | null;
  /** evalBatch messages the worker may still send: EVAL_BATCH_WINDOW, less those received, plus the evalCredit sent */
  credit: number;
  /** derivations received in its batches so far */
  derivations: number;
  /** when the evaluation last became dispatchable: its dispatch latency ends when the worker accepts the job */
  queuedAt: Date;
};
export type BuildJobEntry = {
  kind: 'build'; jobId: string; workerId: string; derivationBuildId: string; attempt: number; targetCaches: ReadonlySet<string>; actor: JobActor;
  /** what build.progress last said: log bytes while building, NAR bytes and paths while uploading */
  progress: { phase: 'building' | 'uploading'; bytes: number; paths: number; reportedAt: number };
  /** its derivation's name, predicted peak and the peak its worker's heartbeats last reported (memoryReservations.ts) */
  memory: BuildMemory;
  /** the worker took the job (jobAccepted): a refusal from then on is a give-back, which does not pause the worker */
  taken: boolean;
  /** the job began on the worker (a build log or a NAR push of it arrived): its loss then spends the attempt */
  begun: boolean;
};
type BuildMemory = { name: string | null; predicted: number | null; reported: number | null };
export type Job = EvalJobEntry | BuildJobEntry;
export type JobEnd = Extract<WorkerJobEvent, { type: 'succeeded' | 'failed' | 'refused' | 'lost' | 'cancelled' }>;

type NewJob = (Omit<EvalJobEntry, 'actor' | 'chain' | 'failure' | 'credit' | 'derivations'> & { attempt: number })
  | (Omit<BuildJobEntry, 'actor' | 'progress' | 'memory' | 'taken' | 'begun'> & { memory?: Omit<BuildMemory, 'reported'> });

export class JobTable {
  private readonly jobs = new Map<string, Job>();
  /** worker id → its running jobs by kind: placement asks per candidate and build, so it is kept, not counted */
  private readonly counts = new Map<string, Record<Job['kind'], number> & { worker: ConnectedWorker }>();
  /** workers that went from idle to working or back this turn: their connection actor hears it once, at the turn's end */
  private readonly turned = new Set<ConnectedWorker>();
  /** each running job's root span (docs/metrics.md, "Stage traces"), written when the job ends */
  private readonly spans = new Map<string, EndSpan>();

  constructor(
    private readonly supervisor: Supervisor,
    private readonly buildProgress: BuildProgressReporter,
    private readonly tracer: StageTracer = disabledTracer,
  ) {}

  get(jobId: string): Job | undefined {
    return this.jobs.get(jobId);
  }

  all(): Job[] {
    return [...this.jobs.values()];
  }

  /** Records a dispatched job and starts its actor. */
  add(job: NewJob, worker: ConnectedWorker): Job {
    this.count(worker, job.kind, 1);
    const subject = job.kind === 'eval' ? job.evaluationId : job.derivationBuildId;
    const actor = this.supervisor.spawnLight({
      id: job.jobId, kind: `${job.kind}-job`, machine: workerJobMachine, summarize: summarizeWorkerJob,
      input: { kind: job.kind, jobId: job.jobId, workerId: worker.hello.workerId, subject, attempt: job.attempt, dispatchedAt: Date.now() },
      // the rows are the truth: a job whose actor crashed is re-queued with the worker's other jobs when it is lost
      rehydrate: () => null,
    });
    const entry: Job = job.kind === 'eval'
      ? { ...job, chain: Promise.resolve(), failure: null, credit: EVAL_BATCH_WINDOW, derivations: 0, actor }
      : { ...job, actor, progress: { phase: 'building', bytes: 0, paths: 0, reportedAt: 0 }, memory: { name: null, predicted: null, ...job.memory, reported: null }, taken: false, begun: false };
    this.jobs.set(job.jobId, entry);
    if (this.tracer.enabled) {
      this.spans.set(job.jobId, this.tracer.start(job.kind === 'eval' ? 'server.evaluation_job' : 'server.build_job', jobRootSpan(job.jobId), {
        job_id: job.jobId, worker: worker.hello.workerId, attempt: job.attempt,
        ...(job.kind === 'eval' ? { evaluation_id: job.evaluationId } : { derivation_build_id: job.derivationBuildId }),
      }));
    }
    return entry;
  }

  /**
   * Ends a job once: false when its actor says the job already ended (a result after a loss, a
   * second result), and the caller then does nothing.
   */
  end(job: Job, event: JobEnd): boolean {
    // the table, not the actor, says whether the job is still running: an actor a subtree restart
    // dropped keeps its state, and a second end must not free its worker's slot twice
    if (this.jobs.get(job.jobId) !== job || !job.actor.can(event)) return false;
    job.actor.send(event);
    this.jobs.delete(job.jobId);
    this.spans.get(job.jobId)?.(event.type === 'succeeded' ? 'ok' : 'error', { outcome: event.type });
    this.spans.delete(job.jobId);
    const counts = this.counts.get(job.workerId);
    if (counts) this.count(counts.worker, job.kind, -1);
    return true;
  }

  running(worker: ConnectedWorker, kind: Job['kind']): number {
    return this.counts.get(worker.hello.workerId)?.[kind] ?? 0;
  }

  private count(worker: ConnectedWorker, kind: Job['kind'], delta: number): void {
    const workerId = worker.hello.workerId;
    let counts = this.counts.get(workerId);
    if (!counts) this.counts.set(workerId, (counts = { eval: 0, build: 0, worker }));
    // a worker that reconnected while its old connection's jobs still run: the new connection shows them all
    else if (delta > 0) counts.worker = worker;
    counts[kind] += delta;
    const before = worker.running.jobs;
    worker.running.jobs = counts.eval + counts.build;
    if (worker.running.jobs === 0) this.counts.delete(workerId);
    if ((before === 0) === (worker.running.jobs === 0)) return;
    if (this.turned.size === 0) queueMicrotask(() => this.tellWorkers());
    this.turned.add(worker);
  }

  /** A worker that turned idle or busy this turn: one event to its connection actor, as it is at the turn's end. */
  private tellWorkers(): void {
    for (const worker of this.turned) worker.actor?.send({ type: worker.running.jobs > 0 ? 'busy' : 'idle' });
    this.turned.clear();
  }

  ofWorker(workerId: string): Job[] {
    return this.all().filter((j) => j.workerId === workerId);
  }

  /** The caches a worker may push into: the targets of its running builds. */
  writableFor(worker: ConnectedWorker): Set<string> {
    const names = new Set<string>();
    for (const job of this.jobs.values()) if (job.kind === 'build' && job.workerId === worker.hello.workerId) for (const c of job.targetCaches) names.add(c);
    return names;
  }

  /** build.progress, at most once a second per job and phase (the first report of a phase goes at once). */
  reportProgress(job: BuildJobEntry, phase: 'building' | 'uploading', bytes: number, paths: number): void {
    const p = job.progress;
    if (p.phase !== phase) Object.assign(p, { phase, bytes: 0, paths: 0, reportedAt: 0 });
    p.bytes += bytes;
    p.paths += paths;
    if (Date.now() - p.reportedAt < 1000) return;
    p.reportedAt = Date.now();
    void this.buildProgress.report({ derivationBuildId: job.derivationBuildId, status: 'started', phase, bytes: p.bytes, paths: p.paths });
  }
}
