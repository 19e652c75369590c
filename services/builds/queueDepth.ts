// worker.queue_depth (spec: Live updates, the board socket): the jobs waiting for a worker, queued
// builds by system plus queued evaluations, published by the scheduler's leader after its passes
// when the numbers changed, at most once a second whatever the number of passes, and less often
// when counting takes long: the count reads every queued build, and with 500,000 of them it took
// 1.2 s, so once a second it kept one of a 2-core server's cores busy while a graph was recorded
// (bench/README.md, eval-record, h38). The pause after a count is at least COUNT_SHARE times its
// duration, and at most MAX_PAUSE_MS (a count slowed by a lock or a stall does not silence the
// board for long). Pauses are measured on a monotonic clock (performance.now), not the wall clock:
// a deadline stored from the wall clock, which then was set back an hour, silenced the board for
// that hour (review r3-6).
import type { Sql } from 'postgres';
import type { Events } from '../../storage/index.js';

const MIN_INTERVAL_MS = 1000;
/** A count's duration times this is the least pause before the next: at most 1/20 of the time counting. */
const COUNT_SHARE = 20;
/** The longest pause after a count, however long it took. */
const MAX_PAUSE_MS = 60_000;

export class QueueDepthReporter {
  private nextAt = -Infinity;
  private last: string | null = null;

  constructor(
    private readonly sql: Sql,
    private readonly events: Pick<Events, 'publish'>,
    /** milliseconds that never go back; tests pass their own readings */
    private readonly clock: { now(): number } = performance,
  ) {}

  /** After a pass of the leader: counts the queue unless it did within the last second, and publishes a change. */
  async report(): Promise<void> {
    const now = this.clock.now();
    if (now < this.nextAt) return;
    this.nextAt = now + MIN_INTERVAL_MS;
    const rows = await this.sql<{ system: string; n: number }[]>`
      select d.system, count(*)::int as n from derivation_builds db join derivations d on d.id = db.derivation_id
      where db.status = 'queued' group by d.system
      union all
      select 'evaluation', count(*)::int from evaluations where phase = 'queued'`;
    const tookMs = this.clock.now() - now;
    this.nextAt = Math.max(this.nextAt, now + Math.min(MAX_PAUSE_MS, COUNT_SHARE * tookMs));
    const bySystem: Record<string, number> = {};
    let queued = 0;
    for (const r of rows) {
      queued += r.n;
      if (r.system !== 'evaluation') bySystem[r.system] = r.n;
    }
    const content = { queued, by_system: bySystem };
    const text = JSON.stringify(content);
    if (text === this.last) return;
    this.last = text;
    this.events.publish('worker.queue_depth', content);
  }
}
