// An evalJob: fetch the commit (or the uploaded source tree), evaluate the wildcard, walk the derivation closure, and stream it
// to the server as evalBatch messages (derivations in dependency order, then attributes and
// attribute errors), closed by evalResult with the totals.
import { EVAL_BATCH_TARGET_BYTES, jobFailure, parseAttributeWildcard, type EvalJob, type JobFailure } from '../protocol/index.js';
import { derivationClosure } from './derivationGraph.js';
import { evaluateFlake } from './flakeEval.js';
import { checkoutCommit } from './gitCheckout.js';
import { fetchSource } from './sourceFetch.js';
import { evalInputsStep } from './evalInputs.js';
import { batchesOf, reply, type JobContext } from './jobContext.js';
import { EvalStatsCollector } from './evalStats.js';
import { EVALUATION_OOM_SCORE } from './oomScore.js';
import { jobRootSpan, type SpanIds } from '../protocol/index.js';

/** A rough encoded size: MessagePack is a little smaller than JSON for these shapes. */
const estimate = (item: unknown): number => JSON.stringify(item).length;

export async function runEvalJob(job: EvalJob, ctx: JobContext): Promise<void> {
  const stats = ctx.settings.evalMetrics ? await EvalStatsCollector.open() : null;
  // The worker's span of the job hangs below the server's (docs/metrics.md, "Stage traces").
  const span = ctx.tracer.child('worker.evaluation_job', jobRootSpan(job.jobId), { job_id: job.jobId });
  let ok = false;
  try {
    ok = await evaluate(job, ctx, stats, span.ids);
  } finally {
    span.end(ok ? 'ok' : 'error');
    // Not awaited: the final message is sent, and the job's slot must be free when the server,
    // hearing it, sends the next job (awaiting here had the worker refuse that job as busy).
    void stats?.close().catch((e: unknown) => ctx.log.warn({ err: e, jobId: job.jobId }, 'could not remove the evaluation\'s statistics files'));
  }
}

/** true when the evaluation succeeded */
async function evaluate(job: EvalJob, ctx: JobContext, stats: EvalStatsCollector | null, jobSpan: SpanIds): Promise<boolean> {
  const stage = (name: string) => ctx.tracer.child(name, jobSpan).end;
  const started = Date.now();
  const activity = (kind: 'fetch' | 'eval', message: string) => reply(ctx, { t: 'evalActivity', jobId: job.jobId, kind, message: message.slice(0, 4096) });
  const timeout = job.timeoutSecs > 0 ? AbortSignal.timeout(job.timeoutSecs * 1000) : undefined;
  const signal = timeout ? AbortSignal.any([ctx.signal, timeout]) : ctx.signal;
  const fail = (failure: JobFailure) => {
    // A cancel caused by our own timer is the job's time limit, not a cancel.
    const final = failure.reason === 'cancelled' && timeout?.aborted ? jobFailure('timeout', `the evaluation took longer than ${job.timeoutSecs} s`) : failure;
    ctx.log.info({ jobId: job.jobId, reason: final.reason }, 'evaluation failed');
    reply(ctx, { t: 'jobFailed', jobId: job.jobId, failure: final, durationMs: Date.now() - started, logBytes: 0, logDroppedBytes: 0 });
    return false;
  };

  const wildcard = parseAttributeWildcard(job.attributes);
  if (!wildcard.ok) return fail(jobFailure('eval_error', `the attribute wildcard is invalid: ${wildcard.field}: ${wildcard.reason}`));
  const what = job.source ? 'the uploaded source' : job.commit;
  if (what === null) return fail(jobFailure('eval_error', 'the job names neither a commit nor a source upload'));
  activity('fetch', job.source ? 'fetching the uploaded source' : `fetching ${job.repository} at ${what}`);
  const fetched = stage('eval.fetch');
  const checkout = job.source ? await fetchSource(ctx.settings.baseDir, job.source, ctx.settings.childEnv, signal)
    : await checkoutCommit(ctx.settings.baseDir, job.project, job.repository, what, ctx.settings.childEnv, signal, job.access);
  fetched(checkout.ok ? 'ok' : 'error');
  if (!checkout.ok) return fail(checkout.failure);
  // Hotspot files in the worker's own directories are shown relative to them, never in full.
  stats?.hotspots.hidePrefix(checkout.clone);
  stats?.hotspots.hidePrefix(ctx.settings.baseDir);
  activity('fetch', `fetched ${what}`);
  const inputs = evalInputsStep(job, ctx, checkout.flakeRef, signal, (message) => activity('fetch', message));
  const evaluated = stage('eval.evaluate');
  const evaluation = await evaluateFlake({
    prepareInputs: inputs.prepare,
    flakeRef: checkout.flakeRef, wildcard: wildcard.value, env: ctx.settings.evalEnv, signal,
    ...(stats ? { stats } : {}), onActivity: (message) => activity('eval', message),
    ...(ctx.settings.oomScoreAdjust === null ? {} : { oomScore: EVALUATION_OOM_SCORE }),
    pool: { size: ctx.settings.evalForkWorkers, minFreeBytes: ctx.settings.minFreeRamBytes },
  });
  evaluated(evaluation.ok ? 'ok' : 'error', evaluation.ok ? { attributes: evaluation.value.attributes.length, errors: evaluation.value.errors.length } : {});
  // the uploads use the job's capability, which ends with the evaluation's report
  await inputs.uploaded();
  if (!evaluation.ok) return fail(evaluation.failure);
  const { attributes, errors } = evaluation.value;

  let derivations;
  activity('eval', `reading the derivation closure of ${attributes.length} attributes`);
  const walked = stage('eval.closure');
  try {
    derivations = await derivationClosure(attributes.map((a) => a.drvPath), ctx.settings.childEnv, signal);
    walked('ok', { derivations: derivations.length });
  } catch (e) {
    walked('error');
    if (signal.aborted) return fail(jobFailure('cancelled', 'the evaluation was cancelled'));
    return fail(jobFailure('worker_error', e instanceof Error ? e.message : String(e)));
  }
  for (const batch of batchesOf(derivations, estimate, EVAL_BATCH_TARGET_BYTES)) {
    if (!await sendsWithCredit(ctx, signal)) return fail(jobFailure('cancelled', 'the evaluation was cancelled'));
    reply(ctx, { t: 'evalBatch', jobId: job.jobId, derivations: batch, attributes: [], errors: [] });
  }
  const named = [...attributes.map((a) => ({ kind: 'attribute' as const, a })), ...errors.map((e) => ({ kind: 'error' as const, e }))];
  for (const batch of batchesOf(named, (item) => estimate(item.kind === 'attribute' ? item.a : item.e), EVAL_BATCH_TARGET_BYTES)) {
    if (!await sendsWithCredit(ctx, signal)) return fail(jobFailure('cancelled', 'the evaluation was cancelled'));
    reply(ctx, {
      t: 'evalBatch', jobId: job.jobId, derivations: [],
      attributes: batch.flatMap((item) => (item.kind === 'attribute' ? [item.a] : [])),
      errors: batch.flatMap((item) => (item.kind === 'error' ? [item.e] : [])),
    });
  }
  const evalStats = stats?.stats() ?? null;
  reply(ctx, {
    t: 'evalResult', jobId: job.jobId, commit: job.commit, derivationCount: derivations.length, attributeCount: attributes.length,
    errorCount: errors.length, durationMs: Date.now() - started, ...(evalStats ? { stats: evalStats } : {}),
  });
  ctx.log.info({ jobId: job.jobId, derivations: derivations.length, attributes: attributes.length, errors: errors.length }, 'evaluation done');
  return true;
}

/** Waits for the server's credit for one more evalBatch (docs/proto.md, "Evaluation batches"); false when cancelled first. */
async function sendsWithCredit(ctx: JobContext, signal: AbortSignal): Promise<boolean> {
  try {
    await ctx.batchCredit.take(signal);
    return true;
  } catch {
    return false;
  }
}
