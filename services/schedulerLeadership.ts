// The scheduler's leader: one process per database, the holder of a PostgreSQL advisory lock,
// re-queues the jobs of server processes that died (services/serverInstance.ts) every few seconds;
// the others try the lock on each pass. The lock is a session lock on a reserved connection, so
// PostgreSQL hands it to another process as soon as the leader's session ends.
import type { Logger } from 'pino';
import type { ReservedSql, Sql } from 'postgres';
import type { Events } from '../storage/index.js';
import { requeueOrphanedJobs } from './schedulerQueries.js';

const SCHEDULER_LOCK = 7_414_101;
const ORPHAN_SWEEP_MS = 5000;

export class SchedulerLeadership {
  private lock: ReservedSql | null = null;
  private sweptAt = 0;

  constructor(
    private readonly sql: Sql,
    private readonly events: Events,
    private readonly log: Logger,
  ) {}

  get isLeader(): boolean {
    return this.lock !== null;
  }

  /** Takes the lead if it is free and, leading, sweeps the orphaned jobs when it is time; whether this process leads. */
  async pass(): Promise<boolean> {
    if (!(await this.lead())) return false;
    if (Date.now() - this.sweptAt >= ORPHAN_SWEEP_MS) {
      this.sweptAt = Date.now();
      const requeued = await requeueOrphanedJobs(this.events);
      if (requeued > 0) this.log.info({ jobs: requeued }, 're-queued the jobs of server processes that are gone');
    }
    return true;
  }

  private async lead(): Promise<boolean> {
    if (this.lock) return true;
    const reserved = await this.sql.reserve();
    const [row] = await reserved<{ locked: boolean }[]>`select pg_try_advisory_lock(${SCHEDULER_LOCK}) as locked`;
    if (!row?.locked) {
      reserved.release();
      return false;
    }
    this.lock = reserved;
    // a new leader sweeps at once: the previous one may have died with orphans to re-queue
    this.sweptAt = 0;
    return true;
  }

  async release(): Promise<void> {
    if (!this.lock) return;
    await this.lock`select pg_advisory_unlock(${SCHEDULER_LOCK})`.catch(() => undefined);
    this.lock.release();
    this.lock = null;
  }
}
