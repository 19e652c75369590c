// A worker's declines of build jobs (docs/builds.md, "Declined builds"): a `jobRefused`, before the
// worker took the job or after (a give-back: its shared store holds paths the job may not use that
// another build still holds). A decline is no build attempt: the build never ran; the row counts
// them (derivation_builds.declines, written with the re-queue) and the retry limit leaves them out.
// Here, in memory on the process the worker is connected to (the one that dispatches to it), only
// the pauses: the build is not offered to that worker again for a delay that doubles with each of
// that worker's declines of it, up to a cap; other workers may take it at once. Forgetting a pause
// (a restart, past the bounds below) only offers the build to that worker sooner.
import type { Clock } from '../../supervisors/index.js';

/** The first decline's delay before the build is offered to that worker again. */
const DECLINE_PAUSE_MS = 2000;
/** The longest such delay: a worker that keeps declining a build is offered it once in this long. */
const DECLINE_PAUSE_CAP_MS = 300_000;
/** How many builds' pauses are kept; past it the least recently declined are forgotten. */
const KEPT_BUILDS = 50_000;
/** How many workers' pauses are kept per build; past it the least recently declining is forgotten. */
const KEPT_WORKERS_PER_BUILD = 16;

/**
 * per worker: its declines of this build and until when it is not offered the build; `floor`: the
 * most declines of a worker forgotten past the bound, where a worker not kept starts counting
 */
type Declines = { workers: Map<string, { count: number; until: number }>; floor: number };

/** The delay after a worker's `count`th decline of one build. */
const declinePauseMs = (count: number): number => Math.min(DECLINE_PAUSE_CAP_MS, DECLINE_PAUSE_MS * 2 ** Math.min(count - 1, 30));

/** The decline from which the delay stays at its cap (9: 2 s, 4 s, … 256 s, then 300 s). */
export const DECLINES_TO_CAP = Math.ceil(Math.log2(DECLINE_PAUSE_CAP_MS / DECLINE_PAUSE_MS)) + 1;

export class BuildDeclines {
  private readonly builds = new Map<string, Declines>();

  constructor(private readonly clock: Clock) {}

  /** The worker declined the build: its count of declines of the build and the delay now. */
  declined(buildId: string, workerId: string): { count: number; pauseMs: number } {
    const declines: Declines = this.builds.get(buildId) ?? { workers: new Map(), floor: 0 };
    // most recently declined last: the oldest go first past the bounds
    this.builds.delete(buildId);
    this.builds.set(buildId, declines);
    if (this.builds.size > KEPT_BUILDS) this.builds.delete(this.builds.keys().next().value!);
    const { workers } = declines;
    // A worker forgotten past the bound does not start again at the first delay: with more
    // decliners than the bound, the build would otherwise go round them at the pass rate (review r3).
    const count = (workers.get(workerId)?.count ?? declines.floor) + 1;
    const pauseMs = declinePauseMs(count);
    workers.delete(workerId);
    workers.set(workerId, { count, until: this.clock.now().getTime() + pauseMs });
    if (workers.size > KEPT_WORKERS_PER_BUILD) {
      const [oldest, forgotten] = workers.entries().next().value!;
      workers.delete(oldest);
      declines.floor = Math.max(declines.floor, forgotten.count);
    }
    return { count, pauseMs };
  }

  /** The workers the build is not offered to now (null: none), for placement to skip. */
  pausedFor(buildId: string): ((workerId: string) => boolean) | null {
    const workers = this.builds.get(buildId)?.workers;
    if (!workers) return null;
    const now = this.clock.now().getTime();
    return (workerId) => (workers.get(workerId)?.until ?? 0) > now;
  }

  /** The build completed: nothing about it is needed any more. */
  forget(buildId: string): void {
    this.builds.delete(buildId);
  }
}
