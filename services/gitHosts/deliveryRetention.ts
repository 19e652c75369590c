// retentionDays for the Git host's webhook deliveries (spec: "webhook and task action deliveries"):
// the ids remembered to drop a delivery sent twice go retentionDays after they arrived. A host
// redelivers within days (GitHub keeps deliveries three), far inside the default 90.
import type { Sql } from 'postgres';

const SLICE = 5000;

/** Deletes delivery ids received more than `retentionDays` before `now`, in slices; how many rows. 0 keeps everything. */
export async function deleteOldHookDeliveries(sql: Sql, retentionDays: number, now: Date): Promise<number> {
  if (retentionDays <= 0) return 0;
  const before = new Date(now.getTime() - retentionDays * 86_400_000);
  let deleted = 0;
  for (;;) {
    const rows = await sql`
      delete from git_host_deliveries where id in (
        select id from git_host_deliveries where received_at < ${before} limit ${SLICE})
      returning 1`;
    deleted += rows.length;
    if (rows.length < SLICE) return deleted;
  }
}
