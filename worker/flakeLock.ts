// Before a tenant's flake is evaluated: its flake.lock must be complete, and every input in it must
// be a source kiln allows (flakeInputPolicy.ts). Nix fetches whatever a flake locks, even in pure
// mode, so an unchecked lock is a way to read the worker's files.
// Two steps, in this order:
// 1. `builtins.getFlake` in pure mode, as the evaluation will call it. Nix 2.8 refuses an input
//    that is neither in flake.lock nor locked in flake.nix *before* fetching it ("cannot update flake
//    input … in pure mode"), and any other lock change for a `?rev=` ref ("cannot write modified lock
//    file"). `nix flake metadata` alone would fetch the unlocked input first (copying, say,
//    `path:/var/lib/kiln` into the world-readable store) and only then fail.
// 2. `nix flake metadata --no-update-lock-file` prints the lock to check (and fails, too, when the
//    lock would change; never add --no-write-lock-file, which turns that failure into a warning).
// The commit is immutable, so the evaluation that follows sees the same flake.nix and flake.lock,
// and its getFlake cannot change the lock either (step 1).
import { z } from 'zod';
import { jobFailure, type JobFailure } from '../protocol/index.js';
import { classifyEvalFailure } from './failureClassifier.js';
import { ALLOWED_SOURCES, FlakeLocks, refusedInputs } from './flakeInputPolicy.js';
import { nixString } from './flakeExpressions.js';
import { nix, nixErrorText, PURE_EVAL_ARGS } from './nixCli.js';

/** sourcePath: the flake's source in the store (null if Nix did not say); locks: its flake.lock. */
export type LockCheck = { ok: true; sourcePath: string | null; locks: FlakeLocks } | { ok: false; failure: JobFailure; aborted: boolean };

const Metadata = z.object({ locks: FlakeLocks, path: z.string().optional() });

export async function checkFlakeLock(flakeRef: string, env: NodeJS.ProcessEnv, signal?: AbortSignal): Promise<LockCheck> {
  const options = { env, ...(signal ? { signal } : {}) };
  const probe = await nix(['eval', ...PURE_EVAL_ARGS, '--json', '--expr', `builtins.seq (builtins.getFlake ${nixString(flakeRef)}).outPath true`], options);
  if (probe.exitCode !== 0) return refused(nixErrorText(probe.stderr), probe.aborted);

  const metadata = await nix(['flake', 'metadata', ...PURE_EVAL_ARGS, '--json', '--no-update-lock-file', flakeRef], options);
  if (metadata.exitCode !== 0) return refused(nixErrorText(metadata.stderr), metadata.aborted);
  const parsed = Metadata.safeParse(JSON.parse(metadata.stdout));
  if (!parsed.success) return { ok: false, aborted: false, failure: jobFailure('worker_error', `nix flake metadata printed no lock: ${parsed.error.message}`) };
  const refusals = refusedInputs(parsed.data.locks);
  if (refusals.length === 0) return { ok: true, sourcePath: parsed.data.path ?? null, locks: parsed.data.locks };
  const list = refusals.map((r) => `flake input '${r.input}' is refused: ${r.reason}`).join('\n');
  return { ok: false, aborted: false, failure: jobFailure('eval_error', `${list}\nkiln fetches flake inputs only from ${ALLOWED_SOURCES}.`) };
}

const RELOCK_HINT = 'kiln evaluates only flakes whose inputs are all in flake.lock (run `nix flake lock` and commit flake.lock)';

function refused(text: string, aborted: boolean): LockCheck {
  const unlocked = /cannot update flake input '([^']*)' in pure mode/.exec(text);
  if (unlocked) return { ok: false, aborted, failure: jobFailure('eval_error', `flake input '${unlocked[1]}' is not in flake.lock: ${RELOCK_HINT}`) };
  if (/modified lock file|requires lock file changes/.test(text)) return { ok: false, aborted, failure: jobFailure('eval_error', `flake.lock is incomplete or out of date: ${RELOCK_HINT}\n${text}`) };
  return { ok: false, aborted, failure: classifyEvalFailure(text) };
}
