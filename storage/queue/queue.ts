// pg-boss on kiln's database: durable jobs (webhook deliveries, sweeps) that survive a restart.
// pg-boss creates and migrates its own schema (pgboss) under its own advisory lock at start.
import { PgBoss } from 'pg-boss';
import type { Logger } from 'pino';
import { nodePostgresOptions, parseDatabaseUrl } from '../db/index.js';

export interface QueueOptions {
  /** pg-boss's own connection pool, on top of the three kiln pools (pg-boss's default: 10) */
  maxConnections?: number;
}

export async function startQueue(url: string, log: Logger, opts: QueueOptions = {}): Promise<PgBoss> {
  const boss = new PgBoss({
    ...nodePostgresOptions(parseDatabaseUrl(url)),
    application_name: 'kiln-queue',
    max: opts.maxConnections ?? 10,
  });
  // An EventEmitter 'error' without a listener would throw and end the process.
  boss.on('error', (err) => log.error({ err }, 'job queue error'));
  boss.on('warning', (warning) => log.warn({ warning }, 'job queue warning'));
  const started = performance.now();
  await boss.start();
  log.info({ ms: Math.round(performance.now() - started) }, 'job queue started');
  return boss;
}

/** Stops fetching new jobs, waits up to `timeoutMs` for running ones, then closes the pool. */
export async function stopQueue(boss: PgBoss, opts: { timeoutMs?: number } = {}): Promise<void> {
  await boss.stop({ graceful: true, close: true, timeout: opts.timeoutMs ?? 30_000 });
}
