// retentionDays for worker connection history (spec: "worker connection history … open worker
// connections stay until the worker's next connection"): a closed connection row goes retentionDays
// after it closed. An open row goes only once the same worker has connected again since (the process
// that held it died without closing it) and it was last seen more than retentionDays ago; the open
// row of a worker that never came back stays, it is the last thing known of that worker.
import type { Sql } from 'postgres';
import { deleteInSlices, retentionCutoff } from '../../storage/index.js';

/** Deletes connection history older than `retentionDays` before `now`, in slices; how many rows. 0 keeps everything. */
export async function deleteOldWorkerConnections(sql: Sql, retentionDays: number, now: Date): Promise<number> {
  const before = retentionCutoff(retentionDays, now);
  if (before === null) return 0;
  return deleteInSlices(async (limit) => (await sql`
      delete from worker_connections where id in (
        select c.id from worker_connections c
        where (c.disconnected_at is not null and c.disconnected_at < ${before})
           or (c.disconnected_at is null and c.last_seen_at < ${before} and exists (
                select from worker_connections n where n.worker_id = c.worker_id and n.connected_at > c.connected_at))
        limit ${limit})
      returning 1`).length);
}
