// Evaluating a project's wildcard on a flake: first the attribute paths it selects, then the
// derivation of each. One attribute that fails to evaluate must not hide the others, so a batch
// that fails is split in halves until each failing attribute stands alone with its own message:
// k broken attributes among n cost about k·log2(n) extra `nix eval` runs.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import type { AttributeError, AttributeWildcard, EvaluatedAttribute, JobFailure } from '../protocol/index.js';
import { classifyEvalFailure } from './failureClassifier.js';
import { derivationsExpression, selectAttributesExpression } from './flakeExpressions.js';
import { nix, nixErrorText } from './nixCli.js';

export interface FlakeEvaluation {
  attributes: EvaluatedAttribute[];
  errors: AttributeError[];
}

export interface EvaluateOptions {
  flakeRef: string;
  wildcard: AttributeWildcard;
  env: NodeJS.ProcessEnv;
  /** a directory for the expression files */
  scratchDir: string;
  signal?: AbortSignal;
}

/** Attributes per `nix eval` before any bisection. */
const BATCH = 1000;

const AttributePaths = z.array(z.array(z.string()));
const DerivationInfos = z.array(z.union([z.null(), z.strictObject({ drvPath: z.string(), outputs: z.record(z.string(), z.string()) })]));
type DerivationInfos = z.infer<typeof DerivationInfos>;

type EvalRun = { ok: true; json: unknown } | { ok: false; message: string; aborted: boolean };

export async function evaluateFlake(options: EvaluateOptions): Promise<{ ok: true; value: FlakeEvaluation } | { ok: false; failure: JobFailure }> {
  const dir = await mkdtemp(join(options.scratchDir, 'eval-'));
  let counter = 0;
  const evalExpression = async (expression: string): Promise<EvalRun> => {
    const file = join(dir, `expr-${counter++}.nix`);
    await writeFile(file, expression);
    const result = await nix(['eval', '--json', '--file', file], { env: options.env, ...(options.signal ? { signal: options.signal } : {}) });
    await rm(file, { force: true });
    if (result.exitCode !== 0) return { ok: false, message: nixErrorText(result.stderr), aborted: result.aborted };
    return { ok: true, json: JSON.parse(result.stdout) as unknown };
  };
  try {
    const selected = await evalExpression(selectAttributesExpression(options.flakeRef, options.wildcard));
    if (!selected.ok) return { ok: false, failure: selected.aborted ? cancelled() : classifyEvalFailure(selected.message) };
    const paths = AttributePaths.parse(selected.json);
    const unique = [...new Map(paths.map((p) => [JSON.stringify(p), p])).values()];
    const evaluation: FlakeEvaluation = { attributes: [], errors: [] };
    for (let start = 0; start < unique.length; start += BATCH) {
      const aborted = await evaluateBatch(unique.slice(start, start + BATCH), evaluation, (paths) => evalExpression(derivationsExpression(options.flakeRef, paths)));
      if (aborted) return { ok: false, failure: cancelled() };
    }
    return { ok: true, value: evaluation };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

const cancelled = (): JobFailure => ({ class: 'FailedTransient', reason: 'cancelled', message: 'the evaluation was cancelled' });

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
