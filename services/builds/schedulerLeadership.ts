// The scheduler's leader: one process per database, the holder of a PostgreSQL advisory lock,
// re-queues the jobs of server processes that died (services/workers/serverInstance.ts) every few seconds;
// the others try the lock on each pass. The lock is a session lock on a connection of its own
// (storage/db/advisoryLocks.ts), so another process can take it as soon as the leader's session ends.
import type { Logger } from 'pino';
import type { Sql } from 'postgres';
import { trySessionLock, type Events, type HeldLock } from '../../storage/index.js';
import { requeueOrphanedJobs } from './schedulerQueries.js';

const SCHEDULER_LOCK = { single: 7_414_101 };
const ORPHAN_SWEEP_MS = 5000;

export class SchedulerLeadership {
  private lock: HeldLock | null = null;
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
    this.lock = await trySessionLock(this.sql, SCHEDULER_LOCK);
    if (!this.lock) return false;
    // a new leader sweeps at once: the previous one may have died with orphans to re-queue
    this.sweptAt = 0;
    return true;
  }

  async release(): Promise<void> {
    const lock = this.lock;
    this.lock = null;
    await lock?.release();
  }
}
