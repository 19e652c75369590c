// Where a rollup pass stops recomputing: at the retention edge of the level below (docs/metrics.md,
// "Retention"). A level is recomputed from a lookback before its latest rollup, and on an idle
// instance (no new samples for rawDays) or with a short rollupDays that lookback reaches rows the
// retention pass already deleted in part: recomputing such a period from what is left would shrink
// it, and every level above it with it. So a period is recomputed only while it starts at or after
// the edge, when none of its rows below can have been deleted.

/** What the retention passes delete: raw rows before `raw`, minute and hour rollups before `rollups` (null: nothing). */
export interface RetentionCutoffs {
  raw: Date | null;
  rollups: Date | null;
}

export const KEEP_ALL: RetentionCutoffs = { raw: null, rollups: null };

/**
 * Past the cutoff, room for the retention passes of other processes (their clocks, and the worker
 * and instance passes, which delete raw rows at their own times): an hour, far beyond any skew and
 * far inside every retention (a day at least), so only periods long final are left alone.
 */
const EDGE_MARGIN_MS = 3_600_000;

/** The first instant a period may start at and still be recomputed from rows cut at `cutoff`; null: no edge. */
export function recomputeFrom(cutoff: Date | null): Date | null {
  return cutoff === null ? null : new Date(cutoff.getTime() + EDGE_MARGIN_MS);
}

/**
 * Minute and hour rollups are kept two days and the margin at least, whatever rollupDays says: a
 * day's rollup is recomputed from its hours until the day after it ends (its lookback), so with
 * rollupDays 1 the edge would reach a day before it was final and its last hours would be lost.
 */
const ROLLUP_FLOOR_MS = 2 * 86_400_000 + EDGE_MARGIN_MS;

/** The instant before which minute and hour rollups go: rollupDays before `now`, but never later than the floor; null when 0 keeps them. */
export function rollupCutoff(rollupDays: number, now: Date): Date | null {
  return rollupDays > 0 ? new Date(Math.min(now.getTime() - rollupDays * 86_400_000, now.getTime() - ROLLUP_FLOOR_MS)) : null;
}
