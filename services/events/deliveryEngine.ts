// Runs deliveries: pg-boss jobs claim attempts, each attempt is a WebhookDelivery actor under the
// `deliveries` supervisor, outcomes are recorded in batches, attempts of dead processes are taken
// back, and finished deliveries expire after retentionDays. docs/events.md tells the whole story.
import type { PgBoss } from 'pg-boss';
import type { Sql } from 'postgres';
import type { Logger } from 'pino';
import {
  createWebhookDeliveryMachine,
  defaultDeliveryPolicy,
  summarizeDelivery,
  type DeliveryDecision,
  type DeliveryInput,
  type DeliveryPolicy,
  type DeliveryRequest,
  type SendResult,
  type WebhookDeliveryMachine,
} from '../../actors/index.js';
import {
  DELIVERY_QUEUE,
  claimAttempts,
  deleteExpired,
  deliveryState,
  dueRetries,
  enqueueDeliveries,
  ensureDeliveryQueue,
  JOB_ATTEMPTS,
  recoverInterrupted,
  type ClaimedRow,
  type DeliveryJob,
  type DueAttempt,
  type Events,
} from '../../storage/index.js';
import { createDeliveryRecorder } from './deliveryRecorder.js';
import { planAttempt, type AttemptPlan, type RequestContext } from './deliveryRequests.js';
import type { Supervisor } from '../../supervisors/index.js';

export interface DeliverySenders {
  web(request: Extract<DeliveryRequest, { kind: 'web' }>): Promise<SendResult>;
  mail(request: Extract<DeliveryRequest, { kind: 'mail' }>): Promise<SendResult>;
}

export interface DeliveryEngineOptions {
  root: Supervisor;
  /** the scheduler pool */
  sql: Sql;
  /** this process's instance lease key (services/workers/serverInstance.ts): attempts are claimed under it */
  leaseKey: number;
  boss: PgBoss;
  events: Events;
  senders: DeliverySenders;
  openSecret: RequestContext['openSecret'];
  log: Logger;
  /** days to keep finished deliveries (retentionDays); 0 keeps them */
  retentionDays: number;
  userAgent?: string;
  policy?: DeliveryPolicy;
  /** epoch ms; tests pass their own */
  now?: () => number;
  /** jobs per fetch (default 2) and fetching workers (default 4): at most batchSize × workers × JOB_ATTEMPTS (400) attempts run at once */
  batchSize?: number;
  workers?: number;
  pollingIntervalSeconds?: number;
  /** how often attempts of dead processes are looked for (they are also looked for at start) */
  recoveryIntervalMs?: number;
  /** counts each recorded attempt by its outcome (kiln_webhook_deliveries_total) */
  onAttempt?: (outcome: DeliveryDecision['status']) => void;
}

export interface DeliveryEngine {
  /** this process's lease key (event_deliveries.claimed_by) */
  readonly instanceKey: number;
  /** Attempt 1 of a delivery written with events.emitTo(), here and now; null if it was taken already. */
  deliverNow(deliveryId: string): Promise<DeliveryDecision | null>;
  /**
   * Runs the retries that are due by this engine's clock (opts.now), up to JOB_ATTEMPTS of them,
   * at once and resolves when their outcomes are written; returns how many ran. Their pg-boss jobs wait for the database's
   * clock and claim nothing once the attempt ran. A test that steps the clock calls this.
   */
  attemptDue(): Promise<number>;
  /** Takes back attempts whose process died; returns how many. */
  recover(): Promise<number>;
  /** Deletes deliveries finished more than retentionDays ago. */
  expire(): Promise<{ deliveries: number; events: number }>;
  stop(): Promise<void>;
}

const HOUR_MS = 3_600_000;

export async function startDeliveryEngine(opts: DeliveryEngineOptions): Promise<DeliveryEngine> {
  const { sql, boss, log } = opts;
  const now = opts.now ?? Date.now;
  const policy = opts.policy ?? defaultDeliveryPolicy;
  await ensureDeliveryQueue(boss);
  const lease = { key: opts.leaseKey };
  const supervisor = opts.root.supervise({ id: 'deliveries', restartBudget: { maxRestarts: 100, withinMs: 10_000 } });
  const written = createDeliveryRecorder(sql, boss, opts.events);
  const recorder: typeof written = {
    record: (record) => {
      opts.onAttempt?.(record.decision.status);
      return written.record(record);
    },
    flush: () => written.flush(),
  };
  const requestContext: RequestContext = { openSecret: opts.openSecret, userAgent: opts.userAgent ?? 'kiln-webhooks', now };
  const reports = new Map<string, AttemptPlan['report']>();
  const machine: WebhookDeliveryMachine = createWebhookDeliveryMachine(
    {
      now,
      send: (request) => (request.kind === 'web' ? opts.senders.web(request) : opts.senders.mail(request)),
      record: (record) => recorder.record({ ...record, report: reports.get(record.input.deliveryId) ?? null }),
    },
    policy,
  );
  let stopped = false;
  const running = new Set<string>();

  function runActor(input: DeliveryInput): Promise<DeliveryDecision | null> {
    return new Promise((resolve) => {
      let output: DeliveryDecision | null = null;
      const id = `delivery:${input.deliveryId}`;
      running.add(input.deliveryId);
      const done = (decision: DeliveryDecision | null) => {
        running.delete(input.deliveryId);
        resolve(decision);
      };
      try {
        const handle = supervisor.spawn({
          id,
          kind: 'webhook-delivery',
          logic: machine,
          input,
          summarize: summarizeDelivery,
          // After a crash (the outcome could not be written): attempt again while the row still
          // says this process runs this attempt.
          rehydrate: async () => {
            const row = await deliveryState(sql, input.deliveryId);
            const ours = row?.status === 'attempting' && row.claimed_by === lease.key && row.attempts === input.attempt;
            return ours ? { input: { ...input, startedAt: now() } } : null;
          },
        });
        handle.subscribe({
          next: (snapshot) => {
            if (snapshot.status === 'done') output = snapshot.output ?? null;
          },
          complete: () => done(output),
        });
      } catch (error) {
        log.error({ err: error, delivery: input.deliveryId }, 'could not start a delivery actor');
        done(null);
      }
    });
  }

  async function run(row: ClaimedRow): Promise<DeliveryDecision | null> {
    const planned = planAttempt(row, requestContext);
    if (!planned.ok) {
      const at = now();
      const decision: DeliveryDecision = { status: 'dead', nextAttemptAt: null };
      await recorder.record({
        input: { deliveryId: row.id, attempt: row.attempt, maxAttempts: row.max_attempts, event: row.event, target: row.webhook_id ? 'webhook' : 'task action', request: { kind: 'web', url: '', body: '', headers: {} }, startedAt: at },
        outcome: { ok: false, error: planned.reason, finishedAt: at },
        decision,
        report: planned.report,
      });
      return decision;
    }
    const { input, report } = planned.plan;
    if (report) reports.set(input.deliveryId, report);
    try {
      return await runActor(input);
    } finally {
      reports.delete(input.deliveryId);
    }
  }

  async function runDue(due: DueAttempt[]): Promise<(DeliveryDecision | null)[]> {
    if (stopped) return [];
    const rows = await claimAttempts(sql, due, lease.key);
    return Promise.all(rows.map((row) => run(row).catch((err: unknown) => {
      log.error({ err, delivery: row.id }, 'a delivery attempt could not be recorded; it is taken back when its lease is checked');
      return null;
    })));
  }

  const workerIds: string[] = [];
  for (let i = 0; i < (opts.workers ?? 4); i++) {
    workerIds.push(await boss.work<DeliveryJob>(
      DELIVERY_QUEUE,
      { batchSize: opts.batchSize ?? 2, pollingIntervalSeconds: opts.pollingIntervalSeconds ?? 0.5, burstWhenBatchFull: true },
      async (jobs) => {
        await runDue(jobs.flatMap((j) => j.data.due));
      },
    ));
  }
  const wake = () => {
    for (const id of workerIds) boss.notifyWorker(id);
  };
  opts.events.onDeliveriesQueued(wake);

  async function recover(): Promise<number> {
    const rows = await sql.begin(async (tx) => {
      const recovered = await recoverInterrupted(tx, { key: lease.key, running: [...running] });
      await enqueueDeliveries(boss, tx, recovered.filter((r) => r.status === 'retrying').map((r) => ({ delivery: r.id, attempt: r.attempts + 1 })));
      return recovered;
    });
    if (rows.length > 0) {
      log.info({ deliveries: rows.length }, 'took back delivery attempts of a server process that stopped');
      wake();
    }
    return rows.length;
  }
  const guarded = (what: string, task: () => Promise<unknown>) => () => {
    if (!stopped) task().catch((err: unknown) => log.warn({ err }, what));
  };
  await recover();
  const recovery = setInterval(guarded('could not look for interrupted deliveries', recover), opts.recoveryIntervalMs ?? 15_000);
  recovery.unref();
  const expire = () => deleteExpired(sql, opts.retentionDays);
  const retention = setInterval(guarded('could not delete expired deliveries', expire), HOUR_MS);
  retention.unref();
  const firstSweep = setTimeout(guarded('could not delete expired deliveries', expire), 60_000);
  firstSweep.unref();

  return {
    instanceKey: lease.key,
    async deliverNow(deliveryId) {
      const [decision] = await runDue([{ delivery: deliveryId, attempt: 1 }]);
      return decision ?? null;
    },
    async attemptDue() {
      const due = await dueRetries(sql, new Date(now()), JOB_ATTEMPTS);
      return (await runDue(due)).length;
    },
    recover,
    expire,
    async stop() {
      if (stopped) return;
      stopped = true;
      clearInterval(recovery);
      clearInterval(retention);
      clearTimeout(firstSweep);
      await boss.offWork(DELIVERY_QUEUE, { wait: false }).catch(() => undefined);
      supervisor.stop();
      // The lease is the process's and outlives the engine: once the process ends, any other takes
      // back what this one left half-done.
      await recorder.flush().catch(() => undefined);
    },
  };
}
