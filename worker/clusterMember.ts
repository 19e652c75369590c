// A member of rank ≥ 1 of a cluster job (docs/builds.md, "Cluster jobs"): it accepted the job, so it
// holds one build slot, keeps the roster for the operator's log and builds nothing; the server ends
// the hold with cancelJob once the job's build (rank 0) has ended, or when the attempt aborts.
import { jobFailure, type BuildJob } from '../protocol/index.js';
import type { JobContext } from './jobContext.js';

export async function holdClusterSlot(job: BuildJob, ctx: JobContext): Promise<void> {
  const started = Date.now();
  const cluster = job.cluster!;
  ctx.log.info({ jobId: job.jobId, cluster: cluster.id, rank: cluster.rank, roster: cluster.roster }, 'holding a slot for a cluster job');
  if (!ctx.signal.aborted) await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve(), { once: true }));
  ctx.connection.send({ t: 'jobFailed', jobId: job.jobId, failure: jobFailure('cancelled', 'the cluster job ended'), durationMs: Date.now() - started, logBytes: 0, logDroppedBytes: 0 });
}
