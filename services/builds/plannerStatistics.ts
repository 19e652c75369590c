// PostgreSQL's statistics of the build graph's tables, brought up to date when an evaluation has
// just recorded a large share of them (docs/builds.md, "Planner statistics"). The scheduler's
// statements pick their plans from these statistics: right after a graph of 50,000 derivations
// landed in tables that held a few thousand rows, PostgreSQL still believes an evaluation has a
// few dozen builds, and the evaluations' finished check ran 77 ms a call instead of under 1 ms
// (bench/README.md, dispatch). Autovacuum's own analyze follows only after its next round (a
// minute or more), which is most of a 50,000-build dispatch.
import type { Logger } from 'pino';
import type { Sql } from 'postgres';

/**
 * The tables a recording writes and the scheduler's statements read by evaluation. The first two
 * are also vacuumed: a recording only inserts into them (derivations' rows change again only as
 * their builds finish), and until a vacuum marks their pages all-visible every index-only scan
 * reads the heap too: a cold closure view of 50,000 derivations walks derivation_edges by its key,
 * 2.7-3.2 s before a vacuum and 1.1-1.3 s after (bench/README.md, closures, h38). Vacuuming them
 * took 0.15 s and 0.39 s after a 50,000-derivation recording; autovacuum's own vacuum after inserts
 * waits for its next round, and is off on some servers.
 */
const VACUUMED_TABLES = ['derivation_edges', 'derivations'] as const;
const ANALYZED_TABLES = ['derivation_builds', 'builds'] as const;
/** Smaller recordings leave the statistics to autovacuum. */
const MIN_DERIVATIONS = 2_000;
/** A recording this share of the builds table (or more) moves its statistics: autovacuum's own default threshold. */
const MIN_SHARE = 0.1;
/**
 * Runs start at most this often. Any organization's evaluations trigger recordings, so without a
 * bound a tenant pushing large evaluations back to back would keep the server vacuuming; triggers
 * within the interval are coalesced into one run at its end (docs/builds.md, "Planner statistics").
 */
export const MIN_INTERVAL_MS = 5 * 60_000;

/** Runs `run` after `ms` (a test runs it when it chooses). */
export type Later = (run: () => void, ms: number) => void;

const timerLater: Later = (run, ms) => {
  // unref: a pending run does not hold the process open at shutdown (it would only log a warning)
  setTimeout(run, ms).unref();
};

/** Milliseconds on a clock that never goes back (the wall clock set back must not stretch the interval). */
interface MonotonicClock {
  now(): number;
}

export interface PlannerStatisticsOptions {
  clock?: MonotonicClock;
  later?: Later;
}

export class PlannerStatistics {
  private running: Promise<void> | null = null;
  /** a trigger came during a run: one more request after it */
  private again = false;
  /** a run is scheduled for the interval's end; triggers meanwhile are part of it */
  private waiting = false;
  /** when the last run started (ms), for MIN_INTERVAL_MS */
  private lastStart: number | null = null;
  private readonly clock: MonotonicClock;
  private readonly later: Later;

  constructor(private readonly sql: Sql, private readonly log: Logger, options: PlannerStatisticsOptions = {}) {
    this.clock = options.clock ?? performance;
    this.later = options.later ?? timerLater;
  }

  /**
   * An evaluation recorded this many derivations: analyze the graph's tables when that is a large
   * share of them. In the background, one run at a time and at most one start per MIN_INTERVAL_MS
   * (triggers meanwhile make one run later); callers need not wait (the promise ends once the run,
   * if any, was started or scheduled).
   */
  async recorded(derivations: number): Promise<void> {
    if (derivations < MIN_DERIVATIONS || this.waiting) return;
    try {
      const [row] = await this.sql<{ rows: number }[]>`select greatest(reltuples, 0)::float8 as rows from pg_class where oid = 'builds'::regclass`;
      if (derivations >= MIN_SHARE * (row?.rows ?? 0)) this.request();
    } catch (error) {
      this.log.warn({ err: error }, 'reading the build tables\' size failed');
    }
  }

  /** Resolves once no run is in flight (tests; at shutdown the pool's end waits for it). A scheduled run is not waited for. */
  async settle(): Promise<void> {
    while (this.running) await this.running;
  }

  private request(): void {
    if (this.running) {
      this.again = true;
      return;
    }
    if (this.waiting) return;
    const wait = this.lastStart === null ? 0 : this.lastStart + MIN_INTERVAL_MS - this.clock.now();
    if (wait <= 0) {
      this.run();
      return;
    }
    this.waiting = true;
    this.later(() => {
      this.waiting = false;
      this.request();
    }, wait);
  }

  private run(): void {
    this.lastStart = this.clock.now();
    // two statements: vacuum cannot run in the implicit transaction of a multi-statement query
    this.running = this.sql.unsafe(`vacuum (analyze) ${VACUUMED_TABLES.join(', ')}`)
      .then(() => this.sql.unsafe(`analyze ${ANALYZED_TABLES.join(', ')}`))
      .then(() => undefined)
      .catch((error: unknown) => this.log.warn({ err: error }, 'vacuuming or analyzing the build tables failed'))
      .finally(() => {
        this.running = null;
        if (this.again) {
          this.again = false;
          this.request();
        }
      });
  }
}
