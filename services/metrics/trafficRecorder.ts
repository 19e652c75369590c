// The passes behind the stored cache traffic (docs/metrics.md, "Stored metrics"), run by the
// upkeep: a flush of this process's per-minute counters (metrics.cacheFlushIntervalSecs), and a
// rollup pass (metrics.rollupIntervalSecs) that rolls minutes up to hours, days and weeks and
// deletes minutes (and per-file fetch days) past metrics.retention.rawDays and hour rollups past
// metrics.retention.rollupDays. The same pass rolls the job phase samples up (minutes, hours, days,
// weeks) and deletes raw samples past rawDays and minute and hour rollups past rollupDays, and rolls
// the worker samples and instance window rows up likewise (their raw rows go in their own passes).
import type { Config } from '../../config/index.js';
import {
  addPathFetches, addTrafficMinutes, prunePathFetches, prunePhases, pruneSampleRollups, pruneTraffic, retentionCutoff, rollupCutoff, rollUpPhases, rollUpSamples, rollUpTraffic,
  type Sql, type TrafficCounters,
} from '../../storage/index.js';

/** Writes what was counted since the last flush; a failed write keeps the counts for the next. */
export async function flushTraffic(sql: Sql, counters: Pick<TrafficCounters, 'beforeTaking' | 'take' | 'restore' | 'takeFiles' | 'restoreFiles'>): Promise<{ minutes: number }> {
  await counters.beforeTaking.run();
  const rows = counters.take();
  const files = counters.takeFiles();
  try {
    await addTrafficMinutes(sql, rows);
  } catch (err) {
    counters.restore(rows);
    counters.restoreFiles(files);
    throw err;
  }
  try {
    await addPathFetches(sql, files);
  } catch (err) {
    counters.restoreFiles(files);
    throw err;
  }
  return { minutes: rows.length };
}

/** One rollup pass, then retention; how many rows retention deleted. */
export async function rollUpAndPrune(sql: Sql, config: Pick<Config, 'metrics.retention.rawDays' | 'metrics.retention.rollupDays'>, now: Date): Promise<{ deleted: number }> {
  const rawBefore = retentionCutoff(config['metrics.retention.rawDays'], now);
  const rollupBefore = rollupCutoff(config['metrics.retention.rollupDays'], now);
  // Periods at the retention edge are left as they are: part of their rows below may be gone.
  const cutoffs = { raw: rawBefore, rollups: rollupBefore };
  await rollUpTraffic(sql, cutoffs);
  await rollUpPhases(sql, cutoffs);
  await rollUpSamples(sql, cutoffs);
  const deleted = await pruneTraffic(sql, { rawBefore, rollupBefore }) + await prunePhases(sql, { rawBefore, rollupBefore })
    + (rollupBefore === null ? 0 : await pruneSampleRollups(sql, rollupBefore));
  return { deleted: deleted + (rawBefore === null ? 0 : await prunePathFetches(sql, rawBefore)) };
}
