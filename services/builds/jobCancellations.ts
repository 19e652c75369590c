// The scheduler's side of aborting (docs/builds.md, "Aborting"; buildAborts.ts moves the rows):
// the jobs of this process whose evaluation or build was aborted get a cancelJob, and the worker's
// answer to a cancelled job only ends the job, whatever it says.
import type { Sql } from 'postgres';
import { abortedAmong } from './buildAborts.js';
import type { BuildLogs } from './buildLogs.js';
import type { BuildJobEntry, Job, JobTable } from './schedulerJobs.js';
import type { WorkerConnections } from '../workers/index.js';

export class JobCancellations {
  /** build jobs sent a cancelJob because their build was aborted */
  private readonly cancelling = new Set<string>();

  constructor(
    private readonly sql: Sql,
    private readonly jobs: JobTable,
    private readonly workers: WorkerConnections,
    private readonly logs: BuildLogs,
  ) {}

  /** Stops the evaluation's evaluation job if one runs here; the next scheduler pass cancels its aborted builds. */
  cancelEvaluation(evaluationId: string): void {
    for (const job of this.jobs.all()) {
      if (job.kind === 'eval' && job.evaluationId === evaluationId) this.sendCancel(job);
    }
  }

  /**
   * Cancels this process's build jobs whose build is now aborted, whichever process aborted it; the
   * worker kills the build and answers jobFailed `cancelled`, which ends the job (answered).
   */
  async cancelAbortedJobs(): Promise<void> {
    const builds = this.jobs.all().filter((j): j is BuildJobEntry => j.kind === 'build' && !this.cancelling.has(j.jobId));
    if (builds.length === 0) return;
    const aborted = await abortedAmong(this.sql, builds.map((j) => j.derivationBuildId));
    for (const job of builds) {
      if (!aborted.has(job.derivationBuildId)) continue;
      this.cancelling.add(job.jobId);
      this.sendCancel(job);
    }
  }

  /**
   * The worker answered a build job: if it was cancelled, the build is aborted already, so only the
   * job and its log end here and the answer is handled (true); otherwise false.
   */
  async answered(job: BuildJobEntry): Promise<boolean> {
    if (!this.cancelling.delete(job.jobId)) return false;
    if (this.jobs.end(job, { type: 'cancelled' })) await this.logs.finish(job.derivationBuildId, job.attempt).catch(() => undefined);
    return true;
  }

  /** The job's worker is gone: nothing will answer the cancel. Whether the job was being cancelled (its build aborted already). */
  forget(job: Job): boolean {
    return this.cancelling.delete(job.jobId);
  }

  private sendCancel(job: Job): void {
    const worker = this.workers.connected().find((w) => w.hello.workerId === job.workerId);
    worker?.link.send({ t: 'cancelJob', jobId: job.jobId, reason: 'the evaluation was aborted' });
  }
}
