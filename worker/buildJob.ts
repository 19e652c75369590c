// A buildJob: realise the derivation, stream its log, push the closure of its outputs to the
// target caches, then buildResult with each output's NarHash/NarSize/references, or jobFailed.
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { jobFailure, type BuildJob, type JobFailure } from '../protocol/index.js';
import { BuildLogStream } from './buildLogStream.js';
import { inParallel, reply, type JobContext } from './jobContext.js';
import { LogLimiter } from './logLimiter.js';
import { realiseDerivation } from './nixBuild.js';
import { openBuildCgroup, type BuildCgroup } from './buildCgroup.js';
import { jobRootSpan, type BuildResources, type SpanIds } from '../protocol/index.js';
import { writeJobNetrc } from './substituterNetrc.js';
import { closureOf, queryPathInfos, referencesFirst } from './pathInfo.js';
import { jobRoot, removeRoots } from './storeRoots.js';

export async function runBuildJob(job: BuildJob, ctx: JobContext): Promise<void> {
  // The worker's span of the job hangs below the server's (docs/metrics.md, "Stage traces").
  const span = ctx.tracer.child('worker.build_job', jobRootSpan(job.jobId), { job_id: job.jobId, drv_path: job.drvPath });
  let ok = false;
  try {
    ok = await build(job, ctx, span.ids);
  } finally {
    span.end(ok ? 'ok' : 'error');
  }
}

/** true when the build succeeded and its outputs were pushed */
async function build(job: BuildJob, ctx: JobContext, jobSpan: SpanIds): Promise<boolean> {
  const stage = (name: string) => ctx.tracer.child(name, jobSpan).end;
  const started = Date.now();
  const { settings } = ctx;
  const logs = new BuildLogStream(job.jobId, ctx.connection, new LogLimiter({
    burstBytesPerMin: settings.logBurstBytesPerMin,
    sustainedBytesPerHour: settings.logSustainedBytesPerHour,
  }));
  const cgroup = await buildCgroupOf(ctx, job.jobId);
  if (cgroup) ctx.readings.add(job.jobId, cgroup);
  let resources: BuildResources | null = null;
  let built = false;
  const measured = () => (resources ? { resources } : {});
  const fail = (reported: JobFailure) => {
    // Whatever step the cancel interrupted (a Nix command ended by the signal reads as its own
    // failure: show-derivation, a path query), the job was cancelled.
    const failure = ctx.signal.aborted && reported.reason !== 'cancelled' ? jobFailure('cancelled', `the build was cancelled (${reported.message})`) : reported;
    ctx.log.info({ jobId: job.jobId, drvPath: job.drvPath, class: failure.class, reason: failure.reason }, 'build failed');
    reply(ctx, { t: 'jobFailed', jobId: job.jobId, failure, durationMs: Date.now() - started, ...logs.close(), ...measured() });
    return false;
  };
  const rootsDir = settings.gcrootsDir;
  if (rootsDir) await mkdir(rootsDir, { recursive: true });
  const netrc = await writeJobNetrc(job.substituters);
  try {
    const realised = await realiseDerivation({
      ...(ctx.settings.oomScoreAdjust === null ? {} : { oomScore: ctx.settings.oomScoreAdjust }),
      drvPath: job.drvPath,
      timeoutSecs: job.timeoutSecs,
      maxSilentSecs: job.maxSilentSecs,
      cores: settings.maxCores,
      substituters: job.substituters,
      netrcFile: netrc.path,
      gcRoot: rootsDir ? jobRoot(rootsDir, job.jobId) : null,
      scratchDir: join(settings.baseDir, 'tmp'),
      fetchStoredLog: settings.logFetchFromStore,
      builders: settings.builders,
      trust: await ctx.trust(),
      ...(job.cluster ? { cluster: true } : {}),
      env: settings.childEnv,
      signal: ctx.signal,
      onLog: (line) => logs.line(line),
      stage,
      ...(cgroup ? { wrap: (command: string, args: readonly string[]) => ((built = true), cgroup.wrap(command, args)) } : {}),
    });
    // Only a build step that ran has resources: a build that stopped at its inputs has none.
    if (cgroup && built) resources = await cgroup.read().catch(() => null);
    if (!realised.ok && realised.declined) {
      // Given back, not failed: the server queues it again (no attempt counted) and the next try,
      // here or elsewhere, finds the paths let go of or no longer in use.
      ctx.log.info({ jobId: job.jobId, drvPath: job.drvPath }, realised.failure.message);
      logs.close();
      reply(ctx, { t: 'jobRefused', jobId: job.jobId, refusal: 'busy', message: realised.failure.message.slice(0, 4096) });
      return false;
    }
    if (!realised.ok) return fail(realised.failure);

    let infos;
    try {
      infos = referencesFirst(await queryPathInfos(await closureOf(Object.values(realised.outputs), settings.childEnv), settings.childEnv));
    } catch (e) {
      return fail(jobFailure('worker_error', e instanceof Error ? e.message : String(e)));
    }
    if (job.targetCaches.length > 0) {
      const uploaded = stage('build.upload');
      try {
        await inParallel(infos, settings.narPushesPerJob, (info) => ctx.pusher.push(job.jobId, info, job.targetCaches, ctx.signal));
        uploaded('ok', { paths: infos.length });
      } catch (e) {
        uploaded('error');
        if (ctx.signal.aborted) return fail(jobFailure('cancelled', 'the build was cancelled while pushing'));
        return fail(jobFailure('push_failed', e instanceof Error ? e.message : String(e)));
      }
    }
    const byPath = new Map(infos.map((info) => [info.path, info]));
    const outputs = Object.entries(realised.outputs).map(([name, path]) => ({ name, ...byPath.get(path)! }));
    reply(ctx, {
      t: 'buildResult', jobId: job.jobId, drvPath: job.drvPath, outputs, alreadyValid: realised.alreadyValid,
      durationMs: Date.now() - started, ...logs.close(), ...measured(),
    });
    ctx.log.info({ jobId: job.jobId, drvPath: job.drvPath, alreadyValid: realised.alreadyValid }, 'build done');
    return true;
  } finally {
    logs.close(); // a second close only flushes nothing: this one catches a throw above
    ctx.readings.remove(job.jobId);
    await netrc.remove();
    // Not awaited, as the evaluation's statistics files are not: the slot is free once the result is sent.
    void cgroup?.remove().catch((e: unknown) => ctx.log.warn({ err: e, jobId: job.jobId }, 'could not remove the build\'s cgroup'));
    if (rootsDir) await removeRoots(jobRoot(rootsDir, job.jobId));
  }
}

/** The build's cgroup when worker.build.metrics names a usable one; otherwise none, with a warning. */
async function buildCgroupOf(ctx: JobContext, jobId: string): Promise<BuildCgroup | null> {
  const parent = ctx.settings.buildCgroup;
  if (parent === null) return null;
  try {
    return await openBuildCgroup(parent, jobId);
  } catch (e) {
    ctx.log.warn({ err: e, cgroup: parent }, 'cannot make a cgroup for the build under worker.build.cgroup: its resources are not recorded');
    return null;
  }
}
