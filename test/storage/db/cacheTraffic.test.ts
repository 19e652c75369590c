// Stored cache traffic (storage/db/cacheTraffic.ts, services/metrics/trafficRecorder.ts) on a real
// database: minute counters of a synthetic day roll up to hours, days and weeks with exact sums;
// flushes from two processes add up; passes may repeat without counting twice; a late flush is
// still rolled up; retention deletes exactly what is past its boundary.
import { randomBytes } from 'node:crypto';
import type { Sql } from 'postgres';
import t from 'tap';
import { addPathFetches, addTrafficMinutes, insertCache, topFetchedPaths, pruneTraffic, rollUpTraffic, TrafficCounters, trafficSeries, trafficTotalsSince, type TrafficMinute } from '../../../storage/index.js';
import { flushTraffic, rollUpAndPrune } from '../../../services/metrics/index.js';
import { testDatabase } from '../../support/db.js';

const newCache = (sql: Sql, name: string) => insertCache(sql, {
  name, description: '', public: true, priority: 40, owner_id: null, key_name: `test-${name}-1`, public_key: randomBytes(32), secret_key: randomBytes(64),
});

const DAY = Date.parse('2026-11-23T00:00:00Z'); // a Monday
const minute = (cacheId: string, at: number, n: number): TrafficMinute => ({ cacheId, minute: new Date(at), narinfoHits: n, narinfoMisses: 1, upstreamHits: n % 3, narBytesServed: 1000 * n });

t.test('a synthetic day rolls up to hours, a day and a week with exact sums', async (t) => {
  const { sql } = await testDatabase(t);
  const a = await newCache(sql, 'a');
  const b = await newCache(sql, 'b');
  const rows: TrafficMinute[] = [];
  let total = { hits: 0, misses: 0, upstream: 0, bytes: 0 };
  const hourHits = new Array<number>(24).fill(0);
  for (let m = 0; m < 1440; m++) {
    const n = (m * 7) % 13;
    rows.push(minute(a, DAY + m * 60_000, n));
    hourHits[Math.floor(m / 60)]! += n;
    total = { hits: total.hits + n, misses: total.misses + 1, upstream: total.upstream + (n % 3), bytes: total.bytes + 1000 * n };
  }
  rows.push(minute(b, DAY + 5 * 60_000, 100));
  await addTrafficMinutes(sql, rows);
  await rollUpTraffic(sql);
  await rollUpTraffic(sql); // a second pass (another process) counts nothing twice
  const hours = await trafficSeries(sql, a, 'hour', new Date(DAY), new Date(DAY + 86_400_000));
  t.equal(hours.length, 24);
  t.same(hours.map((h) => h.narinfoHits), hourHits);
  t.ok(hours.every((h) => h.narinfoMisses === 60));
  const [day] = await trafficSeries(sql, a, 'day', new Date(DAY - 1), new Date(DAY + 86_400_000));
  t.same(day, { start: new Date(DAY), narinfoHits: total.hits, narinfoMisses: total.misses, upstreamHits: total.upstream, narBytesServed: total.bytes });
  const [week] = await trafficSeries(sql, a, 'week', new Date(DAY - 7 * 86_400_000), new Date(DAY + 86_400_000));
  t.equal(week?.start.toISOString(), '2026-11-23T00:00:00.000Z', 'weeks start on Monday, UTC');
  t.equal(week?.narinfoHits, total.hits);
  const [bDay] = await trafficSeries(sql, b, 'day', new Date(DAY), new Date(DAY + 86_400_000));
  t.equal(bDay?.narinfoHits, 100, 'caches are rolled up apart');

  // A flush from another process into a minute already stored adds to it, and the next pass (even a
  // late one, after a later hour was rolled up) recomputes that hour and the day above it.
  await addTrafficMinutes(sql, [minute(a, DAY + 86_400_000 + 60_000, 1)]);
  await rollUpTraffic(sql);
  await addTrafficMinutes(sql, [minute(a, DAY + 86_340_000, 5)]);
  await rollUpTraffic(sql);
  const [lastHour] = await trafficSeries(sql, a, 'hour', new Date(DAY + 23 * 3_600_000), new Date(DAY + 86_400_000));
  t.equal(lastHour?.narinfoHits, hourHits[23]! + 5);
  const [dayAgain] = await trafficSeries(sql, a, 'day', new Date(DAY), new Date(DAY + 1));
  t.equal(dayAgain?.narinfoHits, total.hits + 5);
});

t.test('retention: minutes past rawDays and hour rollups past rollupDays go, days and weeks stay', async (t) => {
  const { sql } = await testDatabase(t);
  const a = await newCache(sql, 'a');
  const now = new Date(DAY + 30 * 86_400_000);
  // Minutes just before and at the 14-day boundary; an hour rollup at 400 days.
  const rawBoundary = now.getTime() - 14 * 86_400_000;
  await addTrafficMinutes(sql, [minute(a, rawBoundary - 60_000, 1), minute(a, rawBoundary, 2)]);
  await rollUpTraffic(sql);
  const rollupBoundary = now.getTime() - 400 * 86_400_000;
  await sql`insert into cache_traffic_rollups (cache_id, period, start, narinfo_hits) values
    (${a}, 'hour', ${new Date(rollupBoundary - 3_600_000)}, 1), (${a}, 'hour', ${new Date(rollupBoundary)}, 1),
    (${a}, 'day', ${new Date(rollupBoundary - 86_400_000)}, 1), (${a}, 'week', ${new Date(rollupBoundary - 7 * 86_400_000)}, 1)`;
  const { deleted } = await rollUpAndPrune(sql, { 'metrics.retention.rawDays': 14, 'metrics.retention.rollupDays': 400 }, now);
  t.equal(deleted, 2, 'one minute and one hour rollup');
  const minutes = await sql<{ minute: Date }[]>`select minute from cache_traffic_minutes order by minute`;
  t.same(minutes.map((m) => m.minute.getTime()), [rawBoundary]);
  const hours = await sql<{ start: Date }[]>`select start from cache_traffic_rollups where period = 'hour' and start < ${new Date(rollupBoundary + 1)}`;
  t.same(hours.map((h) => h.start.getTime()), [rollupBoundary]);
  t.equal((await sql`select 1 from cache_traffic_rollups where period in ('day', 'week') and start < ${new Date(rollupBoundary)}`).count, 2, 'days and weeks stay forever');
  t.equal(await pruneTraffic(sql, { rawBefore: null, rollupBefore: null }), 0, '0 days keeps everything');
});

t.test('counters flushed by two processes add up; a failed flush keeps its counts', async (t) => {
  const { sql } = await testDatabase(t);
  const a = await newCache(sql, 'a');
  let now = DAY + 30_000;
  const one = new TrafficCounters(() => now);
  const two = new TrafficCounters(() => now);
  for (let i = 0; i < 5; i++) one.narinfo(a, 'hit');
  two.narinfo(a, 'hit');
  two.narinfo(a, 'upstream');
  one.narinfo(a, 'miss');
  one.served(a, 4096);
  now += 60_000;
  one.narinfo(a, 'hit'); // the next minute
  one.narinfo('0e0e0e0e-0000-4000-8000-000000000001', 'hit'); // a cache deleted meanwhile: skipped
  await flushTraffic(sql, one);
  await flushTraffic(sql, two);
  const series = await trafficSeries(sql, a, 'minute', new Date(DAY), new Date(DAY + 3_600_000));
  t.same(series.map((p) => [p.narinfoHits, p.narinfoMisses, p.upstreamHits, p.narBytesServed]), [[6, 1, 1, 4096], [1, 0, 0, 0]]);
  const totals = await trafficTotalsSince(sql, [a], new Date(DAY));
  t.equal(totals.get(a)?.narinfoHits, 7);

  two.narinfo(a, 'hit');
  const closed = (await import('postgres')).default('postgres://nobody@127.0.0.1:1/none', { connect_timeout: 1, max: 1 });
  await t.rejects(flushTraffic(closed, two));
  await closed.end();
  t.equal(two.take().length, 1, 'the counts of a failed flush wait for the next');
});

t.test('the board\'s top fetched paths: at most metrics.labelTopn per cache, most fetched first, since the given day', async (t) => {
  const { sql } = await testDatabase(t);
  const a = await newCache(sql, 'a');
  const b = await newCache(sql, 'b');
  const day = new Date(DAY);
  const yesterday = new Date(DAY - 86_400_000);
  await addPathFetches(sql, [
    { cacheId: a, day, fileHash: 'f1', fetches: 3, bytes: 30 },
    { cacheId: a, day, fileHash: 'f2', fetches: 9, bytes: 90 },
    { cacheId: a, day: yesterday, fileHash: 'f3', fetches: 5, bytes: 50 },
    { cacheId: a, day: yesterday, fileHash: 'f1', fetches: 4, bytes: 40 },
    { cacheId: b, day, fileHash: 'g1', fetches: 1, bytes: 10 },
  ]);
  const top = await topFetchedPaths(sql, [a, b], yesterday, 2);
  t.same(top.get(a)?.map((p) => [p.file_hash, p.fetches, p.bytes]), [['f2', 9, 90], ['f1', 7, 70]], 'two of three, summed over the days');
  t.same(top.get(b)?.map((p) => p.file_hash), ['g1']);
  t.same((await topFetchedPaths(sql, [a], day, 1)).get(a)?.map((p) => p.file_hash), ['f2'], 'one; yesterday not counted');
  t.equal((await topFetchedPaths(sql, [a], day, 0)).size, 0, 'labelTopn 0: none');
});
