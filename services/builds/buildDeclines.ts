// A worker's declines of build jobs (docs/builds.md, "Declined builds"): a `jobRefused`, before the
// worker took the job or after (a give-back: its shared store holds paths the job may not use that
// another build still holds). A decline is no build attempt: the build never ran. It is not offered
// to that worker again for a delay that doubles with each of that worker's declines of it, up to a
// cap; other workers may take it at once. Kept in memory on the process the worker is connected
// to, the one that dispatches to it (see the docs for what a restart forgets).
import type { Clock } from '../../supervisors/index.js';

/** The first decline's delay before the build is offered to that worker again. */
const DECLINE_PAUSE_MS = 2000;
/** The longest such delay: a worker that keeps declining a build is offered it once in this long. */
const DECLINE_PAUSE_CAP_MS = 300_000;
/** How many builds' declines are kept; past it the oldest are forgotten (their next decline starts over at 2 s). */
const KEPT_BUILDS = 50_000;

type Declines = {
  /** the dispatches (attempt numbers) that were declined: none of them is a spent attempt */
  attempts: Set<number>;
  /** per worker: its declines of this build and until when it is not offered the build */
  workers: Map<string, { count: number; until: number }>;
};

/** The delay after a worker's `count`th decline of one build. */
const declinePauseMs = (count: number): number => Math.min(DECLINE_PAUSE_CAP_MS, DECLINE_PAUSE_MS * 2 ** Math.min(count - 1, 30));

/** The decline from which the delay stays at its cap (9: 2 s, 4 s, … 256 s, then 300 s). */
export const DECLINES_TO_CAP = Math.ceil(Math.log2(DECLINE_PAUSE_CAP_MS / DECLINE_PAUSE_MS)) + 1;

export class BuildDeclines {
  private readonly builds = new Map<string, Declines>();

  constructor(private readonly clock: Clock) {}

  /** Attempt `attempt` of the build was declined by the worker: its count of declines of the build and the delay now. */
  declined(buildId: string, attempt: number, workerId: string): { count: number; pauseMs: number } {
    const declines = this.builds.get(buildId) ?? { attempts: new Set<number>(), workers: new Map() };
    // most recently declined last: the oldest go first past KEPT_BUILDS
    this.builds.delete(buildId);
    this.builds.set(buildId, declines);
    if (this.builds.size > KEPT_BUILDS) this.builds.delete(this.builds.keys().next().value!);
    declines.attempts.add(attempt);
    const count = (declines.workers.get(workerId)?.count ?? 0) + 1;
    const pauseMs = declinePauseMs(count);
    declines.workers.set(workerId, { count, until: this.clock.now().getTime() + pauseMs });
    return { count, pauseMs };
  }

  /** The workers the build is not offered to now (null: none), for placement to skip. */
  pausedFor(buildId: string): ((workerId: string) => boolean) | null {
    const declines = this.builds.get(buildId);
    if (!declines) return null;
    const now = this.clock.now().getTime();
    return (workerId) => (declines.workers.get(workerId)?.until ?? 0) > now;
  }

  /**
   * The build's attempts spent by its attempt `attempt`: its number less the declined dispatches
   * before it (at least 1). What the retry limit and backoff look at.
   */
  spent(buildId: string, attempt: number): number {
    const declined = this.builds.get(buildId)?.attempts;
    if (!declined) return attempt;
    let before = 0;
    for (const a of declined) if (a < attempt) before += 1;
    return Math.max(1, attempt - before);
  }

  /**
   * Attempt `attempt` was dispatched: declined numbers from it on belong to an earlier count that
   * was set back to 0 (a restart, another organization's build of it), and no longer count.
   */
  dispatched(buildId: string, attempt: number): void {
    const declined = this.builds.get(buildId)?.attempts;
    if (declined) for (const a of declined) if (a >= attempt) declined.delete(a);
  }

  /** The build completed: nothing about it is needed any more. */
  forget(buildId: string): void {
    this.builds.delete(buildId);
  }
}
