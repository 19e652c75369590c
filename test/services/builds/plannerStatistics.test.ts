// After a large recording the graph tables' statistics are brought up to date at once
// (services/builds/plannerStatistics.ts): PostgreSQL plans the scheduler's statements by them.
import pino from 'pino';
import t from 'tap';
import { MIN_INTERVAL_MS, PlannerStatistics } from '../../../services/builds/plannerStatistics.js';
import { steppedClock } from '../../support/clock.js';
import { testDatabase } from '../../support/db.js';
import { eventually } from '../../support/eventually.js';

t.test('the graph tables are analyzed after a recording that is a large share of them, not after a small one', async (t) => {
  const { sql } = await testDatabase(t);
  const clock = steppedClock(new Date('2026-01-01T00:00:00Z'));
  const statistics = new PlannerStatistics(sql, pino({ level: 'silent' }), { clock: { now: () => clock.now().getTime() }, later: () => t.fail('no run is deferred: the clock is past the interval each time') });
  /** How many times each graph table was analyzed, or vacuumed (the vacuum marks the insert-only tables' pages all-visible, which index-only scans need). */
  const counts = async (column: 'analyze_count' | 'vacuum_count') => {
    await sql`select pg_stat_clear_snapshot()`;
    const rows = await sql<{ relname: string; n: number }[]>`
      select relname, ${sql(column)}::int as n from pg_stat_user_tables
      where relname in ('derivations', 'derivation_builds', 'derivation_edges', 'builds') order by relname`;
    return Object.fromEntries(rows.map((r) => [r.relname, r.n]));
  };
  const analyzed = () => counts('analyze_count');
  const vacuumed = () => counts('vacuum_count');
  const before = await analyzed();
  const vacuumedBefore = await vacuumed();

  await statistics.recorded(1_999);
  await statistics.settle();
  t.same(await analyzed(), before, 'under 2,000 derivations: left to autovacuum');

  // empty tables, as on a new server: the first large evaluation is most of them
  await statistics.recorded(2_000);
  await statistics.settle();
  await eventually(async () => (await analyzed())['builds'] === (before['builds'] ?? 0) + 1, { message: 'the tables were analyzed' });
  t.same(await analyzed(), Object.fromEntries(Object.entries(before).map(([k, n]) => [k, n + 1])), 'all four tables, once');
  const vacuumCounts = await vacuumed();
  t.same(Object.fromEntries(Object.entries(vacuumCounts).map(([k, n]) => [k, n - (vacuumedBefore[k] ?? 0)])),
    { builds: 0, derivation_builds: 0, derivation_edges: 1, derivations: 1 }, 'the two a recording only inserts into vacuumed too');

  // a table PostgreSQL believes holds a million builds rows: 2,000 more do not move its statistics
  await sql`update pg_class set reltuples = 1000000 where oid = 'builds'::regclass`;
  const settled = await analyzed();
  clock.step(MIN_INTERVAL_MS);
  await statistics.recorded(50_000);
  await statistics.settle();
  t.same(await analyzed(), settled, '5 % of the table: left to autovacuum');
  await statistics.recorded(100_000);
  await statistics.settle();
  await eventually(async () => (await analyzed())['builds'] === settled['builds']! + 1, { message: '10 % of the table: analyzed' });
});

t.test('runs start at most once an interval; the triggers within one make one run at its end', async (t) => {
  const { sql } = await testDatabase(t);
  const clock = steppedClock(new Date('2026-01-01T00:00:00Z'));
  const scheduled: { run: () => void; ms: number }[] = [];
  const statistics = new PlannerStatistics(sql, pino({ level: 'silent' }), { clock: { now: () => clock.now().getTime() }, later: (run, ms) => scheduled.push({ run, ms }) });
  const analyzedBuilds = async () => {
    await sql`select pg_stat_clear_snapshot()`;
    const [row] = await sql<{ n: number }[]>`select analyze_count::int as n from pg_stat_user_tables where relname = 'builds'`;
    return row!.n;
  };
  const before = await analyzedBuilds();

  // a hostile tenant's recordings, back to back: the first runs, one of the rest during it
  await statistics.recorded(2_000);
  await statistics.recorded(2_000);
  await statistics.settle();
  await eventually(async () => (await analyzedBuilds()) === before + 1, { message: 'the first trigger ran' });
  t.equal(scheduled.length, 1, 'the trigger during the run is deferred, not run right after it');
  t.equal(scheduled[0]!.ms, MIN_INTERVAL_MS, 'to the interval\'s end');
  clock.step(60_000);
  for (let i = 0; i < 5; i++) await statistics.recorded(2_000);
  await statistics.settle();
  t.equal(scheduled.length, 1, 'triggers while a run is scheduled join it');
  t.equal(await analyzedBuilds(), before + 1, 'nothing more ran within the interval');

  clock.step(MIN_INTERVAL_MS - 60_000);
  scheduled.shift()!.run();
  await statistics.settle();
  await eventually(async () => (await analyzedBuilds()) === before + 2, { message: 'the coalesced run at the interval\'s end' });
  t.equal(scheduled.length, 0, 'one run for all of them');

  clock.step(MIN_INTERVAL_MS / 2);
  await statistics.recorded(2_000);
  t.equal(scheduled.length, 1, 'a trigger half an interval after a run waits for the rest');
  t.equal(scheduled[0]!.ms, MIN_INTERVAL_MS / 2);
  clock.step(MIN_INTERVAL_MS / 2);
  scheduled.shift()!.run();
  await statistics.settle();
  await eventually(async () => (await analyzedBuilds()) === before + 3, { message: 'the deferred run' });
  t.equal(scheduled.length, 0);
});
