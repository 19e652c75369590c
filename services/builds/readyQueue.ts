// The scheduler's ready queue (docs/builds.md, "The scheduler's data structures"): the ready
// builds this process knows of, in memory, so a pass decides placements without reading the whole
// queue again. The database stays the source of truth: the queue is read from it afresh after a
// restart, on every periodic pass and after anything that did not come through this process's own
// status changes (a re-queue, a recording, another process's work); in between, the builds this
// process's completions and substitutions made ready are added as the readiness statement returned
// them (buildStatus.ts: the builds whose readiness counter reached 0), with no read of their own. A build taken from the queue is started with the
// guarded queued → started update, so a stale entry costs one refused update, never a second
// dispatch.
//
// The read takes the `limit` oldest ready builds. Builds no connected worker takes (declined again
// and again, no fitting worker) would stay in that window for ever and keep every newer build of
// every organization out of it; so when a pass tried the whole of a full window and free slots were
// left, the next read pages past it by keyset (queued_at, id), and a read that reaches the end of
// the queue sends the one after it back to the front; a page that finds nothing (its cursor build
// removed, or none after it ready) reads the front in the same read.
import type { Sql } from 'postgres';
import type { Clock } from '../../supervisors/index.js';
import { readyBuilds, type ReadiedBuild, type ReadyBuild } from './schedulerQueries.js';

export class ReadyQueue {
  /** ready builds, oldest first as read; builds made ready later follow */
  private rows = new Map<string, ReadyBuild>();
  private reloadDue = true;
  /** the last read filled the limit: the database holds more ready builds than the queue */
  private truncated = false;
  /** the last row of the last read: where a page past the window starts */
  private lastRead: string | null = null;
  /**
   * the next read, and only that one, starts after this build (null: at the front of the queue);
   * by id, as the database's microseconds of queued_at do not survive a Date
   */
  private after: string | null = null;

  constructor(private readonly sql: Sql, private readonly clock: Clock, private readonly limit: number) {}

  /** Something changed that only the database knows: read the queue from it at the next pass. */
  invalidate(): void {
    this.reloadDue = true;
  }

  /**
   * Builds whose last open input this process's committed transaction closed; one whose retry
   * backoff has not passed yet is left to the periodic read.
   */
  add(builds: readonly ReadiedBuild[]): void {
    const now = this.clock.now();
    for (const { not_before: notBefore, ...build } of builds) {
      if ((notBefore === null || notBefore <= now) && !this.rows.has(build.id)) this.rows.set(build.id, build);
    }
  }

  /** The build left the queue (started, substituted, or found no longer ready). */
  remove(derivationBuildId: string): void {
    this.rows.delete(derivationBuildId);
  }

  /**
   * A pass tried every build of the window and free slots were left: if the window was full, what
   * is left in it cannot be placed now, and the next read takes the window after it. A page is
   * read once: the read after it starts at the front again, so builds before the page (made
   * ready later, back from a retry) are never left behind while the workers are kept busy by
   * builds after it (review r3).
   */
  pagePast(): void {
    if (!this.truncated || this.lastRead === null) return;
    this.after = this.lastRead;
    this.reloadDue = true;
  }

  get size(): number {
    return this.rows.size;
  }

  /** The ready builds for this pass, at most `limit`, after reading what is due from the database. */
  async take(): Promise<ReadyBuild[]> {
    const now = this.clock.now();
    if (this.reloadDue || (this.truncated && this.rows.size < this.limit / 2)) {
      this.reloadDue = false;
      const after = this.after;
      this.after = null;
      let rows = await readyBuilds(this.sql, this.limit, now, undefined, after);
      // An empty page places nothing: its cursor build was removed (orphan GC), or nothing after
      // it is ready any more. The same read goes back to the front rather than a pass later.
      if (after !== null && rows.length === 0) rows = await readyBuilds(this.sql, this.limit, now);
      this.truncated = rows.length === this.limit;
      this.lastRead = rows.at(-1)?.id ?? null;
      this.rows = new Map(rows.map((r) => [r.id, r]));
    }
    const taken: ReadyBuild[] = [];
    for (const row of this.rows.values()) {
      if (taken.length >= this.limit) break;
      taken.push(row);
    }
    return taken;
  }
}
