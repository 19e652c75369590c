// What an evaluation job does with its flake's locked inputs between the lock check and the first
// `nix eval` (docs/eval-cache.md, docs/worker.md "Flake inputs"):
// - worker.eval.cache.share on and the job carries the server's capability: the inputs the store
//   lacks are restored from the organization's shared blobs, where the server has them;
// - worker.capabilities.fetch on: every locked input is fetched now (`nix flake archive`), used by
//   the evaluation or not, and, with sharing on, those the server lacks are uploaded while the
//   evaluation runs (the job waits for them before it reports, while its capability is valid).
// With fetch off the worker fetches only what the evaluation touches, as Nix does, and uploads
// nothing: an input it never fetched whole is not its to share. Nothing here fails the evaluation:
// an input that could not be restored or prefetched is fetched by Nix when the evaluation needs it.
import type { EvalJob } from '../protocol/index.js';
import type { FlakeLocks } from './flakeInputPolicy.js';
import { invalidInputs, lockedInputs, restoreInputs, uploadInputs } from './inputCache.js';
import type { JobContext } from './jobContext.js';
import { nix, nixErrorText, PURE_EVAL_ARGS } from './nixCli.js';

export interface InputsStep {
  prepare: (locks: FlakeLocks) => Promise<void>;
  /** resolves when the uploads started by prepare have ended (at once when there were none) */
  uploaded: () => Promise<void>;
}

export function evalInputsStep(job: EvalJob, ctx: JobContext, flakeRef: string, signal: AbortSignal, activity: (message: string) => void): InputsStep {
  const { settings, log } = ctx;
  const access = settings.evalCacheShare ? (job.inputCache ?? null) : null;
  let uploads: Promise<void> = Promise.resolve();
  const warn = (what: string, problems: string[]) => {
    if (problems.length > 0) log.warn({ jobId: job.jobId, problems }, `${what}: ${problems.length} input(s) failed; Nix fetches them from their origins`);
  };
  return {
    uploaded: () => uploads,
    async prepare(locks) {
      const inputs = lockedInputs(locks);
      if (inputs.length === 0) return;
      if (access) {
        try {
          const missing = await invalidInputs(inputs, settings.evalEnv, signal);
          if (missing.length > 0) {
            const restored = await restoreInputs(access, missing, { baseDir: settings.baseDir, env: settings.evalEnv, signal });
            if (restored.done.length > 0) activity(`restored ${restored.done.length} of ${missing.length} missing flake inputs from the shared evaluation cache`);
            warn('restoring from the shared evaluation cache', restored.problems);
          }
        } catch (e) {
          if (signal.aborted) return;
          log.warn({ jobId: job.jobId, err: e }, 'the shared evaluation cache could not be asked; Nix fetches the inputs from their origins');
        }
      }
      if (!settings.capabilities.fetch) return;
      activity(`prefetching ${inputs.length} locked flake inputs`);
      const archived = await nix(['flake', 'archive', ...PURE_EVAL_ARGS, '--no-update-lock-file', flakeRef], { env: settings.evalEnv, signal });
      if (archived.exitCode !== 0) {
        if (signal.aborted) return;
        // the evaluation may not need the input that failed; if it does, it fails with Nix's own words
        const why = nixErrorText(archived.stderr).slice(0, 1000);
        log.warn({ jobId: job.jobId, why }, 'prefetching the flake inputs failed; the evaluation fetches what it needs');
        activity(`prefetching the flake inputs failed: ${why}`);
        return;
      }
      if (!access) return;
      uploads = uploadInputs(access, inputs, { storeRoot: settings.storeRoot, env: settings.evalEnv, signal })
        .then((report) => {
          if (report.done.length > 0) log.info({ jobId: job.jobId, inputs: report.done.length }, 'uploaded flake inputs to the shared evaluation cache');
          warn('uploading to the shared evaluation cache', report.problems);
        }, (e: unknown) => {
          if (!signal.aborted) log.warn({ jobId: job.jobId, err: e }, 'the flake inputs could not be uploaded to the shared evaluation cache');
        });
    },
  };
}
