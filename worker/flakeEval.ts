// Evaluating a project's wildcard on a flake: first the attribute paths it selects, then the
// derivation of each. One attribute that fails to evaluate must not hide the others, so a batch
// that fails is split in halves until each failing attribute stands alone with its own message:
// k broken attributes among n cost about k·log2(n) extra `nix eval` runs.
// Every run is pure (nixCli.ts, PURE_EVAL_ARGS) and comes after the lock check (flakeLock.ts): the
// tenant's expression reads its flake's sources and locked remote inputs, not the worker's files.
import { jobFailure, type AttributeError, type AttributeWildcard, type EvaluatedAttribute, type JobFailure } from '../protocol/index.js';
import { z } from 'zod';
import { classifyEvalFailure } from './failureClassifier.js';
import { derivationsExpression, selectAttributesExpression } from './flakeExpressions.js';
import { checkFlakeLock } from './flakeLock.js';
import { nix, nixErrorText, PURE_EVAL_ARGS } from './nixCli.js';
import type { EvalStatsCollector } from './evalStats.js';

export interface FlakeEvaluation {
  attributes: EvaluatedAttribute[];
  errors: AttributeError[];
}

export interface EvaluateOptions {
  flakeRef: string;
  wildcard: AttributeWildcard;
  env: NodeJS.ProcessEnv;
  signal?: AbortSignal;
  /** worker.eval.metrics: every `nix eval` run adds its statistics here */
  stats?: EvalStatsCollector;
  /** what the evaluation does now, in words (evaluation.activity) */
  onActivity?: (message: string) => void;
  /** each `nix eval`'s out-of-memory score adjustment (EVALUATION_OOM_SCORE when worker.build.oomScoreAdjust is set) */
  oomScore?: number;
}

/** Attributes per `nix eval` before any bisection. */
const BATCH = 1000;
/**
 * The expression is one argv string, and Linux refuses one over MAX_ARG_STRLEN (128 KiB) with
 * E2BIG. A longer expression is not run: it fails like a broken batch, so bisection splits it
 * until each half fits, and a single attribute whose name alone is too long gets its own error.
 */
export const MAX_EXPRESSION_BYTES = 120 * 1024;

const AttributePaths = z.array(z.array(z.string()));
const DerivationInfos = z.array(z.union([z.null(), z.strictObject({ drvPath: z.string(), outputs: z.record(z.string(), z.string()) })]));
type DerivationInfos = z.infer<typeof DerivationInfos>;

type EvalRun = { ok: true; json: unknown } | { ok: false; message: string; aborted: boolean };

export async function evaluateFlake(options: EvaluateOptions): Promise<{ ok: true; value: FlakeEvaluation } | { ok: false; failure: JobFailure }> {
  const evalExpression = async (expression: string): Promise<EvalRun> => {
    const bytes = Buffer.byteLength(expression);
    if (bytes > MAX_EXPRESSION_BYTES) return { ok: false, message: `the expression to evaluate is ${bytes} bytes, over kiln's limit of ${MAX_EXPRESSION_BYTES}`, aborted: false };
    const args = ['eval', ...PURE_EVAL_ARGS, '--json', '--expr', expression];
    const run = (env: NodeJS.ProcessEnv) => nix(args, { env, ...(options.signal ? { signal: options.signal } : {}), ...(options.oomScore === undefined ? {} : { oomScore: options.oomScore }) });
    const result = options.stats ? await options.stats.around(options.env, run) : await run(options.env);
    if (result.exitCode !== 0) return { ok: false, message: nixErrorText(result.stderr), aborted: result.aborted };
    return { ok: true, json: JSON.parse(result.stdout) as unknown };
  };
  const say = options.onActivity ?? (() => undefined);
  say('checking the flake\'s lock file');
  const lock = await checkFlakeLock(options.flakeRef, options.env, options.signal);
  if (!lock.ok) return { ok: false, failure: lock.aborted ? cancelled() : lock.failure };
  say('selecting the attributes of the wildcard');
  const selected = await evalExpression(selectAttributesExpression(options.flakeRef, options.wildcard));
  if (!selected.ok) return { ok: false, failure: selected.aborted ? cancelled() : classifyEvalFailure(selected.message) };
  const paths = AttributePaths.parse(selected.json);
  const unique = [...new Map(paths.map((p) => [JSON.stringify(p), p])).values()];
  const evaluation: FlakeEvaluation = { attributes: [], errors: [] };
  for (let start = 0; start < unique.length; start += BATCH) {
    say(`evaluating attributes ${start + 1}–${Math.min(unique.length, start + BATCH)} of ${unique.length}`);
    const aborted = await evaluateBatch(unique.slice(start, start + BATCH), evaluation, (paths) => evalExpression(derivationsExpression(options.flakeRef, paths)));
    if (aborted) return { ok: false, failure: cancelled() };
  }
  return { ok: true, value: evaluation };
}

const cancelled = (): JobFailure => jobFailure('cancelled', 'the evaluation was cancelled');

/** Evaluates `paths`, bisecting on failure; returns true when it was cancelled. */
async function evaluateBatch(paths: string[][], into: FlakeEvaluation, run: (paths: string[][]) => Promise<EvalRun>): Promise<boolean> {
  const result = await run(paths);
  if (!result.ok) {
    if (result.aborted) return true;
    if (paths.length === 1) {
      into.errors.push({ path: paths[0]!, message: result.message.slice(0, 16 * 1024) });
      return false;
    }
    const half = Math.ceil(paths.length / 2);
    return (await evaluateBatch(paths.slice(0, half), into, run)) || evaluateBatch(paths.slice(half), into, run);
  }
  const infos: DerivationInfos = DerivationInfos.parse(result.json);
  infos.forEach((info, i) => {
    // Selected attributes that are not derivations (a nested set, a string) are skipped, as in Hydra.
    if (info) into.attributes.push({ path: paths[i]!, drvPath: info.drvPath, outputs: info.outputs });
  });
  return false;
}
