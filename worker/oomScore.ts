// worker.build.oomScoreAdjust: Nix's builds and evaluations run with a higher out-of-memory score
// than the worker, so when memory runs out the kernel kills a build (or, first, an evaluation at
// 600) rather than the worker that reports it. Each child is started through util-linux's `choom`,
// which sets the score and then execs the command: nothing the command forks escapes the score.
// With a Nix daemon the builds are the daemon's children: set the score on the daemon (systemd's
// OOMScoreAdjust=); what kiln sets then reaches only its own client processes.
import { readFileSync } from 'node:fs';

/** The spec's score for evaluation subprocesses, above a build's default so they go first. */
export const EVALUATION_OOM_SCORE = 600;

/** The command line that runs `command` with `score` as its out-of-memory score adjustment. */
export const withOomScore = (score: number, command: string, args: readonly string[]): [string, string[]] =>
  ['choom', ['-n', String(score), '--', command, ...args]];

/**
 * The score children get: `wanted`, or null (left as they inherit it) when it is null or lower than
 * the worker's own and the worker may not lower scores (only root may); `warn` says why.
 */
export function effectiveOomScore(wanted: number | null, warn: (message: string) => void): number | null {
  if (wanted === null) return null;
  const own = Number(readFileSync('/proc/self/oom_score_adj', 'utf8').trim());
  if (wanted < own && process.getuid?.() !== 0) {
    warn(`worker.build.oomScoreAdjust ${wanted} is below the worker's own ${own}, and only root may lower it: builds keep ${own}`);
    return null;
  }
  return wanted;
}
