// What a running job may use: the connection it came on, the NAR pusher of that connection,
// the worker's settings, a logger and the signal that cancels it.
import type { BatchCredit } from './batchCredit.js';
import type { BuildReadings } from './buildReadings.js';
import type { Logger, StageTracer } from '../config/index.js';
import type { Outgoing } from '../protocol/index.js';
import type { ProtoConnection } from './connection.js';
import type { NarPusher } from './narPusher.js';
import type { StoreTrust } from './storeTrust.js';
import type { WorkerSettings } from './settings.js';

export interface JobContext {
  connection: ProtoConnection;
  pusher: NarPusher;
  settings: WorkerSettings;
  log: Logger;
  signal: AbortSignal;
  /** worker.log.traceDir: the job's stage spans (docs/metrics.md, "Stage traces") */
  tracer: StageTracer;
  /** running builds' cgroup readings, sent with the heartbeats */
  readings: BuildReadings;
  /** the server's credit for this job's evalBatch messages (an evaluation's; other jobs send none) */
  batchCredit: BatchCredit;
  /** which valid store paths a build may use as they are (worker/storeTrust.ts), one per worker process */
  trust: () => Promise<StoreTrust>;
}

/** Sends a job's message; a connection that closed meanwhile drops it (the server re-queues the job). */
export const reply = (ctx: JobContext, message: Outgoing): void => void ctx.connection.send(message);

/** Splits `items` into batches of about `targetBytes` by an estimate of each item's encoded size. */
export function* batchesOf<T>(items: readonly T[], sizeOf: (item: T) => number, targetBytes: number): Generator<T[]> {
  let batch: T[] = [];
  let bytes = 0;
  for (const item of items) {
    const size = sizeOf(item);
    if (batch.length > 0 && bytes + size > targetBytes) {
      yield batch;
      batch = [];
      bytes = 0;
    }
    batch.push(item);
    bytes += size;
  }
  if (batch.length > 0) yield batch;
}

/** Runs `work` over `items` with at most `limit` at once; the first failure stops new work and is thrown. */
export async function inParallel<T, R>(items: readonly T[], limit: number, work: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  let failed = false;
  const lanes = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (!failed && next < items.length) {
      const index = next++;
      try {
        results[index] = await work(items[index]!);
      } catch (e) {
        failed = true;
        throw e;
      }
    }
  });
  await Promise.all(lanes);
  return results;
}
