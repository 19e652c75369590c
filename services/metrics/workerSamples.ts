// Worker samples (docs/metrics.md, "Stored metrics: worker samples"): every
// metrics.workerSampleIntervalSecs each server process writes one row per worker connected to it,
// from that worker's last heartbeat (load, memory, store space, slots and running jobs) and the
// connection it came by (whose projects decide who may read it); a worker
// that has not sent a heartbeat yet is skipped. The same pass deletes samples older than
// metrics.retention.rawDays (they are raw samples; 0 keeps them).
import type { Sql } from 'postgres';
import { deleteInSlices, retentionCutoff } from '../../storage/index.js';
import type { WorkerConnections } from '../workers/index.js';

export async function sampleWorkers(sql: Sql, workers: Pick<WorkerConnections, 'connected'>, rawDays: number, now: Date): Promise<{ sampled: number; deleted: number }> {
  const rows = workers.connected().flatMap((w) => (w.load === null ? [] : [{
    worker_id: w.hello.workerId, connection_id: w.connectionId, sampled_at: now, load1: w.load.load1, memory_free_bytes: w.load.memoryFreeBytes, memory_total_bytes: w.load.memoryTotalBytes,
    store_free_bytes: w.load.storeFreeBytes, build_slots: w.hello.maxConcurrentBuilds, builds_running: w.load.runningBuilds,
    eval_slots: w.hello.maxConcurrentEvals, evals_running: w.load.runningEvals,
  }]));
  // Two connections of one worker (a reconnect not yet noticed) give one sample.
  const unique = [...new Map(rows.map((r) => [r.worker_id, r])).values()];
  if (unique.length > 0) await sql`insert into worker_samples ${sql(unique)} on conflict (worker_id, sampled_at) do nothing`;
  const before = retentionCutoff(rawDays, now);
  const deleted = before === null ? 0 : await deleteInSlices(async (limit) => (await sql`
    delete from worker_samples where ctid in (select ctid from worker_samples where sampled_at < ${before} limit ${limit}) returning 1`).length);
  return { sampled: unique.length, deleted };
}
