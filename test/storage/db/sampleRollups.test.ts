// Rollups of the worker samples and the instance window (storage/db/sampleRollups.ts, 0054) on a
// real database: a synthetic day of raw rows (a worker every 15 s over two connections, the
// instance every 30 s) rolls up to minutes, hours, a day and a week whose counts, sums, least and
// largest equal those of the raw rows exactly; a repeated pass changes nothing; retention deletes
// minute and hour rollups past rollupDays at the boundary, days and weeks stay.
import { randomUUID } from 'node:crypto';
import t from 'tap';
import { NO_ID, pruneSampleRollups, rollUpSamples, sampleRollupSeries } from '../../../storage/index.js';
import { rollUpAndPrune } from '../../../services/metrics/index.js';
import { testDatabase } from '../../support/db.js';

const DAY = Date.parse('2026-11-23T00:00:00Z'); // a Monday
const HOUR = 3_600_000;

t.test('a synthetic day rolls up to minutes, hours, a day and a week with exact sums', async (t) => {
  const { sql } = await testDatabase(t);
  const worker = randomUUID();
  const [connA, connB] = [randomUUID(), randomUUID()];
  // 5,760 worker samples: the first half of the day by one connection, the rest by another; load in
  // halves (exact in binary), the store's free space unknown in every third sample.
  await sql`
    insert into worker_samples (worker_id, connection_id, sampled_at, load1, memory_free_bytes, memory_total_bytes, store_free_bytes, build_slots, builds_running, eval_slots, evals_running)
    select ${worker}, case when i < 2880 then ${connA}::uuid else ${connB}::uuid end, ${new Date(DAY)}::timestamptz + i * interval '15 seconds',
           (i % 5) * 0.5, 1000000000 + i * 1000, 8000000000, case when i % 3 = 0 then null else 5000000000 - i end, 4, i % 5, 1, i % 2
    from generate_series(0, 5759) as i`;
  await sql`
    insert into instance_samples (sampled_at, workers_connected, build_slots, builds_running, eval_slots, evals_running, builds_queued, evaluations_queued, evaluations_open)
    select ${new Date(DAY)}::timestamptz + i * interval '30 seconds', 1 + i % 3, 4, i % 5, 1, i % 2, i % 7, i % 4, 3
    from generate_series(0, 2879) as i`;
  await rollUpSamples(sql);

  const raw = async (table: 'worker_samples' | 'instance_samples', metric: string) => (await sql.unsafe<{ n: string; total: string; least: string; greatest: string }[]>(
    `select count(${metric}) as n, sum(${metric}::numeric) as total, min(${metric}::numeric) as least, max(${metric}::numeric) as greatest from ${table}`))[0]!;
  const level = async (source: string, metric: string, period: string) => sql<{ n: string; rows: string; total: string; least: string; greatest: string }[]>`
    select sum(samples) as n, count(distinct start) as rows, sum(total) as total, min(least_value) as least, max(greatest_value) as greatest
    from sample_rollups where source = ${source} and metric = ${metric} and period = ${period}`.then((r) => r[0]!);

  for (const [source, table, metric] of [
    ['worker', 'worker_samples', 'load1'], ['worker', 'worker_samples', 'memory_free_bytes'], ['worker', 'worker_samples', 'store_free_bytes'],
    ['worker', 'worker_samples', 'builds_running'], ['instance', 'instance_samples', 'workers_connected'], ['instance', 'instance_samples', 'builds_queued'],
  ] as const) {
    const expected = await raw(table, metric);
    for (const [period, rows] of [['minute', 1440], ['hour', 24], ['day', 1], ['week', 1]] as const) {
      const got = await level(source, metric, period);
      t.same([got.n, got.total, got.least, got.greatest], [expected.n, expected.total, expected.least, expected.greatest], `${source} ${metric} per ${period}: exact`);
      t.equal(Number(got.rows), rows, `${source} ${metric}: ${rows} ${period} rows`);
    }
  }
  const [hourRow] = await sql<{ samples: string; total: string }[]>`
    select sum(samples) as samples, sum(total) as total from sample_rollups where source = 'worker' and metric = 'builds_running' and period = 'hour' and start = ${new Date(DAY + 5 * HOUR)}`;
  t.same([Number(hourRow!.samples), Number(hourRow!.total)], [240, 480], 'an hour: 240 samples, builds running 0..4 round and round');

  const before = await sql`select * from sample_rollups order by source, worker_id, connection_id, metric, period, start`;
  await rollUpSamples(sql);
  t.same(await sql`select * from sample_rollups order by source, worker_id, connection_id, metric, period, start`, before, 'a second pass counts nothing twice');

  const day = (connections: string[] | null) => sampleRollupSeries(sql, { source: 'worker', workerId: worker, connections, period: 'day', from: new Date(DAY), to: new Date(DAY + 24 * HOUR), limit: 100 });
  const all = (await day(null)).find((p) => p.metric === 'builds_running');
  const first = (await day([connA])).find((p) => p.metric === 'builds_running');
  t.same([all?.samples, all?.total], [5760, 11520], 'a worker\'s day over its connections');
  t.same([first?.samples, first?.total], [2880, 5760], 'one connection\'s share');
  t.same(await day([randomUUID()]), [], 'a connection of no sample: nothing');
  const instance = await sampleRollupSeries(sql, { source: 'instance', workerId: NO_ID, connections: null, period: 'hour', from: new Date(DAY), to: new Date(DAY + HOUR), limit: 100 });
  t.same(instance.find((p) => p.metric === 'evaluations_open'), { start: new Date(DAY), metric: 'evaluations_open', samples: 120, total: 360, least: 3, greatest: 3 });
});

t.test('retention: minute and hour rollups past rollupDays go, days and weeks stay', async (t) => {
  const { sql } = await testDatabase(t);
  const now = new Date(DAY + 30 * 24 * HOUR);
  const boundary = now.getTime() - 400 * 24 * HOUR;
  const row = (period: string, at: number) => sql`
    insert into sample_rollups values ('instance', ${NO_ID}, ${NO_ID}, 'build_slots', ${period}, ${new Date(at)}, 1, 1, 1, 1)`;
  await row('minute', boundary - 60_000);
  await row('minute', boundary);
  await row('hour', boundary - HOUR);
  await row('hour', boundary);
  await row('day', boundary - 24 * HOUR);
  await row('week', boundary - 7 * 24 * HOUR);
  const { deleted } = await rollUpAndPrune(sql, { 'metrics.retention.rawDays': 14, 'metrics.retention.rollupDays': 400 }, now);
  t.equal(deleted, 2, 'one minute and one hour rollup');
  const left = await sql<{ period: string; start: Date }[]>`
    select period, start from sample_rollups where period in ('minute', 'hour') and start <= ${new Date(boundary)} order by period`;
  t.same(left.map((r) => [r.period, r.start.getTime()]), [['hour', boundary], ['minute', boundary]], 'the rollups at the boundary stay');
  const kept = await sql`select 1 from sample_rollups where (period = 'day' and start = ${new Date(boundary - 24 * HOUR)})
    or (period = 'week' and start = ${new Date(boundary - 7 * 24 * HOUR)})`;
  t.equal(kept.count, 2, 'days and weeks stay forever');
  t.equal(await pruneSampleRollups(sql, new Date(0)), 0);
});
