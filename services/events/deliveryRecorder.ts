// Writes attempt outcomes in batches: one transaction for the outcomes that arrive in one turn of
// the event loop (up to 200), with the next jobs of failed attempts and the task.action.update
// events of task actions. At a thousand deliveries a second this is what keeps the database calm.
import type { PgBoss } from 'pg-boss';
import type { Sql } from 'postgres';
import type { DeliveryRecord } from '../../actors/index.js';
import { enqueueDeliveries, recordAttempts, type Events, type PreparedEvent } from '../../storage/index.js';
import type { TaskActionReport } from './deliveryRequests.js';

export interface RecordedAttempt extends DeliveryRecord {
  report: TaskActionReport | null;
}

interface Waiting {
  record: RecordedAttempt;
  resolve(): void;
  reject(error: unknown): void;
}

const BATCH = 200;

export interface DeliveryRecorder {
  record(record: RecordedAttempt): Promise<void>;
  /** resolves when everything handed in so far is written */
  flush(): Promise<void>;
}

export function createDeliveryRecorder(sql: Sql, boss: PgBoss, events: Events): DeliveryRecorder {
  const waiting: Waiting[] = [];
  let scheduled = false;
  let running: Promise<void> = Promise.resolve();

  async function write(batch: Waiting[]): Promise<void> {
    const records = batch.map((w) => w.record);
    const emitted: PreparedEvent[] = [];
    try {
      await sql.begin(async (tx) => {
        const moved = await recordAttempts(tx, records.map((r) => ({
          deliveryId: r.input.deliveryId,
          attempt: r.input.attempt,
          status: r.decision.status,
          startedAt: new Date(r.input.startedAt),
          finishedAt: new Date(r.outcome.finishedAt),
          responseStatus: r.outcome.status ?? null,
          error: r.outcome.error ?? null,
          excerpt: r.outcome.excerpt ?? null,
          nextAttemptAt: r.decision.nextAttemptAt === null ? null : new Date(r.decision.nextAttemptAt),
        })));
        const current = records.filter((r) => moved.has(r.input.deliveryId));
        await enqueueDeliveries(boss, tx, current
          .filter((r) => r.decision.status === 'retrying')
          .map((r) => ({ delivery: r.input.deliveryId, attempt: r.input.attempt + 1, startAfter: new Date(r.decision.nextAttemptAt!) })));
        for (const r of current) {
          if (!r.report) continue;
          emitted.push(await events.emit(tx, 'task.action.update', {
            project: r.report.project,
            task: r.report.task,
            action_id: r.report.actionId,
            action: r.report.action,
            kind: r.report.kind,
            status: r.decision.status,
            delivery_id: r.input.deliveryId,
            event: r.input.event,
            attempt: r.input.attempt,
            ...(r.outcome.error ? { error: r.outcome.error.slice(0, 2000) } : {}),
          }, { projectId: r.report.projectId, taskId: r.report.taskId }));
        }
      });
    } catch (error) {
      for (const w of batch) w.reject(error);
      return;
    }
    events.afterCommit(emitted);
    for (const w of batch) w.resolve();
  }

  // One writer at a time; what arrives while it writes is the next batch, so batches grow with load.
  async function loop(): Promise<void> {
    while (waiting.length > 0) await write(waiting.splice(0, BATCH));
  }
  function start(): void {
    scheduled = false;
    running = running.then(loop);
  }

  return {
    record(record) {
      return new Promise<void>((resolve, reject) => {
        waiting.push({ record, resolve, reject });
        if (!scheduled) {
          scheduled = true;
          setImmediate(start);
        }
      });
    },
    async flush() {
      if (scheduled) start();
      await running;
    },
  };
}
