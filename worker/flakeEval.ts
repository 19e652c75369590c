// Evaluating a project's wildcard on a flake: first the attribute paths it selects (one `nix eval`,
// which forces only attribute names), then the derivation of each, in the evaluation pool
// (evalPool.ts): the paths are split into chunks, a few per subprocess, that idle subprocesses take
// in turn. One attribute that fails to evaluate must not hide the others, so a chunk that fails is
// split in halves until each failing attribute stands alone with its own message: k broken
// attributes among n cost about k·log2(n) extra calls. An attribute whose subprocess was killed for
// memory fails the same way, alone, with that reason.
// Every evaluation is pure (nixCli.ts, PURE_EVAL_ARGS) and comes after the lock check (flakeLock.ts):
// the tenant's expression reads its flake's sources and locked remote inputs, not the worker's files.
import { jobFailure, type AttributeError, type AttributeWildcard, type EvaluatedAttribute, type JobFailure } from '../protocol/index.js';
import { z } from 'zod';
import { classifyEvalFailure } from './failureClassifier.js';
import { derivationsOfFlake, flakeExpression, selectAttributesExpression } from './flakeExpressions.js';
import { EvalPool } from './evalPool.js';
import { minFreeRamBytes, procMemoryProbe, type MemoryProbe } from './memoryProbe.js';
import { availableParallelism } from 'node:os';
import { checkFlakeLock } from './flakeLock.js';
import { flakeGraphOf } from './flakeGraph.js';
import type { FlakeLocks } from './flakeInputPolicy.js';
import { nix, nixErrorText, PURE_EVAL_ARGS } from './nixCli.js';
import type { EvalStatsCollector } from './evalStats.js';

interface AttributeResults {
  attributes: EvaluatedAttribute[];
  errors: AttributeError[];
}

export interface FlakeEvaluation extends AttributeResults {
  pool: PoolReport;
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
  /** each evaluation subprocess's out-of-memory score adjustment (EVALUATION_OOM_SCORE when worker.build.oomScoreAdjust is set) */
  oomScore?: number;
  pool?: PoolSettings;
  /** after the lock check, before anything is evaluated: the locked inputs' turn (worker/inputCache.ts) */
  prepareInputs?: (locks: FlakeLocks) => Promise<void>;
}

export interface PoolSettings {
  /** worker.eval.forkWorkers, resolved (defaultForkWorkers) */
  size?: number;
  /** worker.system.minFreeRamMb, resolved (minFreeRamBytes) */
  minFreeBytes?: number;
  memory?: MemoryProbe;
  watchIntervalMs?: number;
}

/** What the pool did during one evaluation. */
export interface PoolReport {
  subprocesses: number;
  /** subprocesses started, one per call */
  calls: number;
  memoryKills: number;
  peakRssBytes: number;
}

/** worker.eval.forkWorkers null: the host's cores, at most 16. */
export const defaultForkWorkers = (): number => Math.min(16, availableParallelism());
/** Chunks per subprocess: enough that a slow chunk does not leave the others idle at the end. */
const CHUNKS_PER_SUBPROCESS = 4;

/** Attributes per call at most, before any bisection. */
const BATCH = 1000;
/**
 * The selection is one argv string, and Linux refuses one over MAX_ARG_STRLEN (128 KiB) with
 * E2BIG; a call to the pool is one line of the repl's input, kept to the same bound. A longer
 * expression is not run: it fails like a broken batch, so bisection splits it until each half
 * fits, and a single attribute whose name alone is too long gets its own error.
 */
export const MAX_EXPRESSION_BYTES = 120 * 1024;

const AttributePaths = z.array(z.array(z.string()));
const DerivationInfos = z.array(z.union([z.null(), z.strictObject({ drvPath: z.string(), outputs: z.record(z.string(), z.string()) })]));
type DerivationInfos = z.infer<typeof DerivationInfos>;

type EvalRun = { ok: true; json: unknown } | { ok: false; message: string; aborted: boolean };

/** One pure `nix eval` of `expression`, with the options' environment, signal, score and statistics. */
async function runEvalExpression(expression: string, options: EvaluateOptions, onStart?: (pid: number) => void): Promise<EvalRun> {
  const bytes = Buffer.byteLength(expression);
  if (bytes > MAX_EXPRESSION_BYTES) return { ok: false, message: `the expression to evaluate is ${bytes} bytes, over kiln's limit of ${MAX_EXPRESSION_BYTES}`, aborted: false };
  const args = ['eval', ...PURE_EVAL_ARGS, '--json', '--expr', expression];
  const run = (env: NodeJS.ProcessEnv) => nix(args, {
    env, ...(options.signal ? { signal: options.signal } : {}), ...(options.oomScore === undefined ? {} : { oomScore: options.oomScore }), ...(onStart ? { onStart } : {}),
  });
  const result = options.stats ? await options.stats.around(options.env, run) : await run(options.env);
  if (result.exitCode !== 0) return { ok: false, message: nixErrorText(result.stderr), aborted: result.aborted };
  return { ok: true, json: JSON.parse(result.stdout) as unknown };
}

export async function evaluateFlake(options: EvaluateOptions): Promise<{ ok: true; value: FlakeEvaluation } | { ok: false; failure: JobFailure }> {
  const say = options.onActivity ?? (() => undefined);
  say('checking the flake\'s lock file');
  const lock = await checkFlakeLock(options.flakeRef, options.env, options.signal);
  if (!lock.ok) return { ok: false, failure: lock.aborted ? cancelled() : lock.failure };
  options.stats?.describeFlake(lock.sourcePath, flakeGraphOf(lock.locks));
  await options.prepareInputs?.(lock.locks);
  if (options.signal?.aborted) return { ok: false, failure: cancelled() };
  say('selecting the attributes of the wildcard');
  const selected = await runEvalExpression(selectAttributesExpression(options.flakeRef, options.wildcard), options);
  if (!selected.ok) return { ok: false, failure: selected.aborted ? cancelled() : classifyEvalFailure(selected.message) };
  const paths = AttributePaths.parse(selected.json);
  const unique = [...new Map(paths.map((p) => [JSON.stringify(p), p])).values()];
  const evaluation = await evaluateInPool(unique, options, say);
  return evaluation ? { ok: true, value: evaluation } : { ok: false, failure: cancelled() };
}

const cancelled = (): JobFailure => jobFailure('cancelled', 'the evaluation was cancelled');

/** The derivation of each path, in chunks across the pool; null when cancelled. */
async function evaluateInPool(paths: string[][], options: EvaluateOptions, say: (message: string) => void): Promise<FlakeEvaluation | null> {
  const settings = options.pool ?? {};
  const size = settings.size ?? defaultForkWorkers();
  const pool = new EvalPool({
    size, memory: settings.memory ?? procMemoryProbe, minFreeBytes: settings.minFreeBytes ?? minFreeRamBytes(0),
    ...(settings.watchIntervalMs === undefined ? {} : { watchIntervalMs: settings.watchIntervalMs }),
    onMemoryKill: (message) => say(`an evaluation call failed: ${message}; its attributes are retried alone`),
  });
  const chunkSize = Math.max(1, Math.min(BATCH, Math.ceil(paths.length / (size * CHUNKS_PER_SUBPROCESS))));
  const chunks: string[][][] = [];
  for (let start = 0; start < paths.length; start += chunkSize) chunks.push(paths.slice(start, start + chunkSize));
  say(`evaluating ${paths.length} attributes in ${chunks.length} ${chunks.length === 1 ? 'call' : 'calls'}, up to ${Math.min(size, chunks.length)} at once`);
  const run = async (chunk: string[][]): Promise<EvalRun> => {
    const outcome = await pool.run((onStart) => runEvalExpression(`let flake = ${flakeExpression(options.flakeRef)}; in ${derivationsOfFlake(chunk)}`, options, onStart));
    if (!outcome.killedForMemory) return outcome.result;
    return { ok: false, message: `the attribute could not be evaluated: ${outcome.message}`, aborted: false };
  };
  const parts = chunks.map((): AttributeResults => ({ attributes: [], errors: [] }));
  const aborted = await Promise.all(chunks.map((chunk, i) => evaluateBatch(chunk, parts[i]!, run)));
  if (aborted.some(Boolean)) return null;
  return {
    attributes: parts.flatMap((p) => p.attributes), errors: parts.flatMap((p) => p.errors),
    pool: { subprocesses: size, calls: pool.calls, memoryKills: pool.memoryKills, peakRssBytes: pool.peakRssBytes },
  };
}

/** Evaluates `paths`, bisecting on failure; returns true when it was cancelled. */
async function evaluateBatch(paths: string[][], into: AttributeResults, run: (paths: string[][]) => Promise<EvalRun>): Promise<boolean> {
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
