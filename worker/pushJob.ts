// A pushJob: push store paths this worker already has (an evaluation's .drv files and sources)
// to the target caches, references first. The store is shared with other organizations' jobs and
// the cache signs what it receives with its own key, so every path, with its closure, must first
// be acceptable as it is (worker/storeTrust.ts; docs/builds.md, "The shared store"). A push job
// names no substituters: it is checked under the operator's keys alone, which the paths it exists
// for pass on their own (a .drv is text-addressed, a source content-addressed; the check hashes them).
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { jobFailure, type PushJob } from '../protocol/index.js';
import { inParallel, reply, type JobContext } from './jobContext.js';
import { allValid } from './nixCli.js';
import { queryPathInfos, referencesFirst } from './pathInfo.js';
import { jobRoot, removeRoots, rootPaths } from './storeRoots.js';
import { letGo } from './storeTrust.js';

export async function runPushJob(job: PushJob, ctx: JobContext): Promise<void> {
  const started = Date.now();
  const fail = (reason: 'inputs_unavailable' | 'push_failed' | 'cancelled' | 'worker_error', message: string) =>
    reply(ctx, { t: 'jobFailed', jobId: job.jobId, failure: jobFailure(reason, message), durationMs: Date.now() - started, logBytes: 0, logDroppedBytes: 0 });
  const env = ctx.settings.childEnv;
  const run = { env, signal: ctx.signal };
  if (!(await allValid(job.paths, { env }))) return fail('inputs_unavailable', 'some of the paths to push are not valid in this worker\'s store');
  const rootsDir = ctx.settings.gcrootsDir;
  const root = rootsDir ? jobRoot(rootsDir, job.jobId) : null;
  try {
    // Rooted before the check, for the job's lifetime: what the check saw is what gets pushed.
    if (root !== null) {
      await mkdir(rootsDir, { recursive: true });
      const refused = await rootPaths(job.paths, root, run, join(ctx.settings.baseDir, 'tmp'));
      if (ctx.signal.aborted) return fail('cancelled', 'the push was cancelled');
      if (refused !== null) return fail('inputs_unavailable', refused);
    }
    let verdict;
    try {
      verdict = await (await ctx.trust()).check(job.paths, { substituters: [], signal: ctx.signal }, run);
    } catch (e) {
      if (ctx.signal.aborted) return fail('cancelled', 'the push was cancelled');
      return fail('worker_error', e instanceof Error ? e.message : String(e));
    }
    if (verdict.rejected.length > 0) {
      // Not pushed, any of it: let go of, so that whatever needs them next gets them afresh.
      if (root !== null) await removeRoots(root);
      const refused = await letGo(verdict.rejected, run);
      const what = verdict.rejected.join(', ');
      return fail('inputs_unavailable', `nothing pushed: the store holds ${what}, which no content address, operator key or build here vouches for (another organization's job may have put it there); ${refused === null ? 'let go of' : `not let go of, in use: ${refused}`}`);
    }
    const infos = referencesFirst(await queryPathInfos(job.paths, env));
    const statuses = await inParallel(infos, ctx.settings.narPushesPerJob, (info) => ctx.pusher.push(job.jobId, info, job.targetCaches, ctx.signal));
    reply(ctx, { t: 'pushResult', jobId: job.jobId, paths: infos.map((info, i) => ({ path: info.path, status: statuses[i]! })) });
  } catch (e) {
    if (ctx.signal.aborted) return fail('cancelled', 'the push was cancelled');
    return fail('push_failed', e instanceof Error ? e.message : String(e));
  } finally {
    if (root !== null) await removeRoots(root);
  }
}
