// A pushJob: push store paths this worker already has (an evaluation's .drv files and sources)
// to the target caches, references first.
import { jobFailure, type PushJob } from '../protocol/index.js';
import { inParallel, reply, type JobContext } from './jobContext.js';
import { allValid } from './nixCli.js';
import { queryPathInfos, referencesFirst } from './pathInfo.js';

export async function runPushJob(job: PushJob, ctx: JobContext): Promise<void> {
  const started = Date.now();
  const fail = (reason: 'inputs_unavailable' | 'push_failed' | 'cancelled' | 'worker_error', message: string) =>
    reply(ctx, { t: 'jobFailed', jobId: job.jobId, failure: jobFailure(reason, message), durationMs: Date.now() - started, logBytes: 0, logDroppedBytes: 0 });
  const env = ctx.settings.childEnv;
  if (!(await allValid(job.paths, { env }))) return fail('inputs_unavailable', 'some of the paths to push are not valid in this worker\'s store');
  try {
    const infos = referencesFirst(await queryPathInfos(job.paths, env));
    const statuses = await inParallel(infos, ctx.settings.narPushesPerJob, (info) => ctx.pusher.push(job.jobId, info, job.targetCaches, ctx.signal));
    reply(ctx, { t: 'pushResult', jobId: job.jobId, paths: infos.map((info, i) => ({ path: info.path, status: statuses[i]! })) });
  } catch (e) {
    if (ctx.signal.aborted) return fail('cancelled', 'the push was cancelled');
    return fail('push_failed', e instanceof Error ? e.message : String(e));
  }
}
