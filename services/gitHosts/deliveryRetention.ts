// retentionDays for the Git host's webhook deliveries (spec: "webhook and task action deliveries"):
// the ids remembered to drop a delivery sent twice go retentionDays after they arrived. A host
// redelivers within days (GitHub keeps deliveries three), far inside the default 90.
import type { Sql } from 'postgres';
import { deleteInSlices, retentionCutoff } from '../../storage/index.js';

/** Deletes delivery ids received more than `retentionDays` before `now`, in slices; how many rows. 0 keeps everything. */
export async function deleteOldHookDeliveries(sql: Sql, retentionDays: number, now: Date): Promise<number> {
  const before = retentionCutoff(retentionDays, now);
  if (before === null) return 0;
  return deleteInSlices(async (limit) => (await sql`
      delete from git_host_deliveries where id in (
        select id from git_host_deliveries where received_at < ${before} limit ${limit})
      returning 1`).length);
}
