// retentionDays for the collector's own record (the option's "finished admin tasks"): passes and
// deep rounds that ended more than retentionDays ago leave gc_runs; the newest ended run of each
// kind stays (the schedule counts from it, GET /admin/gc shows it). Run by the hourly retention
// pass of services/assembly/upkeep.ts.
import type { Sql } from 'postgres';
import { deleteOldGcRuns, retentionCutoff } from '../../storage/index.js';

/** Deletes collection runs that ended more than `retentionDays` before `now`; how many. 0 keeps everything. */
export async function deleteOldCollectionRuns(sql: Sql, retentionDays: number, now: Date): Promise<number> {
  const before = retentionCutoff(retentionDays, now);
  return before === null ? 0 : deleteOldGcRuns(sql, before);
}
