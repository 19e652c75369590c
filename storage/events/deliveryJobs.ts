// The pg-boss queue that drives deliveries. A job says "these attempts are due": up to
// JOB_ATTEMPTS deliveries, each with the number of the attempt that is due. A job is a trigger
// only: the delivery row is the source of truth, and an attempt that no longer matches its row
// claims nothing (deliveryLedger.ts). Jobs are inserted in the transaction that writes the
// deliveries or records a failed attempt, so a rollback leaves no job behind. Grouping attempts
// keeps pg-boss's work per delivery small: at a thousand deliveries a second, one job per
// delivery costs more than the deliveries.
import type { PgBoss } from 'pg-boss';
import type { ISql } from 'postgres';

export const DELIVERY_QUEUE = 'kiln-event-delivery';

/** Attempts per job: small enough that several processes share a burst, large enough to batch. */
export const JOB_ATTEMPTS = 50;

export interface DueAttempt {
  delivery: string;
  attempt: number;
}

export interface DeliveryJob {
  due: DueAttempt[];
}

export interface DueDelivery extends DueAttempt {
  /** absent: at once */
  startAfter?: Date;
}

/** Idempotent; every server process calls it at start. */
export async function ensureDeliveryQueue(boss: PgBoss): Promise<void> {
  await boss.createQueue(DELIVERY_QUEUE, {
    // A job outlives its process only when the process died; the rows' claims decide then.
    expireInSeconds: 120,
    // A handler that failed (e.g. the database was away) runs again; the claims make it harmless.
    retryLimit: 3,
    retryDelay: 5,
    deleteAfterSeconds: 3600,
  });
}

/** pg-boss statements on a postgres.js connection or transaction (pg-boss's `db` option). */
export function bossDatabase(sql: ISql) {
  return {
    async executeSql(text: string, values?: unknown[]): Promise<{ rows: Record<string, unknown>[] }> {
      const rows = await sql.unsafe(text, (values ?? []) as never[]);
      return { rows: rows as unknown as Record<string, unknown>[] };
    },
  };
}

/** Queues the attempts in `sql`'s transaction: those due together share jobs of up to JOB_ATTEMPTS. */
export async function enqueueDeliveries(boss: PgBoss, sql: ISql, due: readonly DueDelivery[]): Promise<void> {
  if (due.length === 0) return;
  const byTime = new Map<number, DueAttempt[]>();
  for (const d of due) {
    const at = d.startAfter?.getTime() ?? 0;
    let list = byTime.get(at);
    if (!list) byTime.set(at, (list = []));
    list.push({ delivery: d.delivery, attempt: d.attempt });
  }
  const jobs: { data: DeliveryJob; startAfter?: Date }[] = [];
  for (const [at, attempts] of byTime) {
    for (let i = 0; i < attempts.length; i += JOB_ATTEMPTS) {
      jobs.push({ data: { due: attempts.slice(i, i + JOB_ATTEMPTS) }, ...(at > 0 ? { startAfter: new Date(at) } : {}) });
    }
  }
  await boss.insert(DELIVERY_QUEUE, jobs, { db: bossDatabase(sql) });
}
