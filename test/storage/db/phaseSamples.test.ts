// Stored job phase timings (storage/db/phaseSamples.ts, services/metrics/phaseRecorder.ts) on a real
// database: raw samples of a synthetic day roll up to minutes, hours, a day and a week with exact
// counts, totals and maxima; passes may repeat without counting twice; a late flush is still
// rolled up; retention deletes exactly what is past its boundary; a failed flush keeps its samples.
import t from 'tap';
import { PhaseSampleBuffer, phaseSeries, prunePhases, rollUpPhases, addPhaseSamples, type PhaseSample } from '../../../storage/index.js';
import { flushPhases, rollUpAndPrune } from '../../../services/metrics/index.js';
import { testDatabase } from '../../support/db.js';

const DAY = Date.parse('2026-11-23T00:00:00Z'); // a Monday
const HOUR = 3_600_000;

t.test('a synthetic day of samples rolls up to minutes, hours, a day and a week', async (t) => {
  const { sql } = await testDatabase(t);
  const samples: PhaseSample[] = [];
  const hourTotals = new Array<number>(24).fill(0);
  let total = 0;
  let max = 0;
  // Every 20 minutes: a build dispatch and a build run; an evaluation dispatch every hour.
  for (let m = 0; m < 1440; m += 20) {
    const ms = ((m * 37) % 1000) + 1;
    samples.push({ kind: 'build', phase: 'dispatch', endedAt: new Date(DAY + m * 60_000 + 30_000), durationMs: ms });
    samples.push({ kind: 'build', phase: 'run', endedAt: new Date(DAY + m * 60_000), durationMs: 10 * ms });
    hourTotals[Math.floor(m / 60)]! += ms;
    total += ms;
    max = Math.max(max, ms);
    if (m % 60 === 0) samples.push({ kind: 'evaluation', phase: 'dispatch', endedAt: new Date(DAY + m * 60_000), durationMs: 5 });
  }
  await addPhaseSamples(sql, samples);
  await rollUpPhases(sql);
  await rollUpPhases(sql); // a second pass (another process) counts nothing twice
  const of = async (period: 'minute' | 'hour' | 'day' | 'week', kind: string, phase: string, from = DAY, to = DAY + 24 * HOUR) =>
    (await phaseSeries(sql, period, new Date(from), new Date(to), 10_000)).filter((p) => p.kind === kind && p.phase === phase);

  const minutes = await of('minute', 'build', 'dispatch');
  t.equal(minutes.length, 72, 'one minute per sample');
  t.same(minutes[1], { kind: 'build', phase: 'dispatch', start: new Date(DAY + 20 * 60_000), samples: 1, totalMs: ((20 * 37) % 1000) + 1, maxMs: ((20 * 37) % 1000) + 1 });
  const hours = await of('hour', 'build', 'dispatch');
  t.equal(hours.length, 24);
  t.same(hours.map((h) => h.totalMs), hourTotals);
  t.ok(hours.every((h) => h.samples === 3));
  const [day] = await of('day', 'build', 'dispatch');
  t.same(day, { kind: 'build', phase: 'dispatch', start: new Date(DAY), samples: 72, totalMs: total, maxMs: max });
  const [run] = await of('day', 'build', 'run');
  t.same([run?.samples, run?.totalMs, run?.maxMs], [72, 10 * total, 10 * max], 'phases are rolled up apart');
  const [evaluations] = await of('day', 'evaluation', 'dispatch');
  t.same([evaluations?.samples, evaluations?.totalMs], [24, 120], 'kinds are rolled up apart');
  const [week] = await of('week', 'build', 'dispatch', DAY - 7 * 24 * HOUR);
  t.equal(week?.start.toISOString(), '2026-11-23T00:00:00.000Z', 'weeks start on Monday, UTC');
  t.same([week?.samples, week?.totalMs, week?.maxMs], [72, total, max]);

  // A late flush (a sample of the day's last minute, after the next day's first was rolled up) is recomputed into its minute, hour, day.
  await addPhaseSamples(sql, [{ kind: 'build', phase: 'dispatch', endedAt: new Date(DAY + 24 * HOUR + 60_000), durationMs: 1 }]);
  await rollUpPhases(sql);
  await addPhaseSamples(sql, [{ kind: 'build', phase: 'dispatch', endedAt: new Date(DAY + 24 * HOUR - 30_000), durationMs: 5000 }]);
  await rollUpPhases(sql);
  const [lastHour] = await of('hour', 'build', 'dispatch', DAY + 23 * HOUR);
  t.same([lastHour?.samples, lastHour?.totalMs, lastHour?.maxMs], [4, hourTotals[23]! + 5000, 5000]);
  const [dayAgain] = await of('day', 'build', 'dispatch');
  t.same([dayAgain?.samples, dayAgain?.maxMs], [73, 5000]);
});

t.test('retention: raw samples past rawDays, minute and hour rollups past rollupDays go; days and weeks stay', async (t) => {
  const { sql } = await testDatabase(t);
  const now = new Date(DAY + 30 * 24 * HOUR);
  const rawBoundary = now.getTime() - 14 * 24 * HOUR;
  await addPhaseSamples(sql, [
    { kind: 'build', phase: 'run', endedAt: new Date(rawBoundary - 1), durationMs: 1 },
    { kind: 'build', phase: 'run', endedAt: new Date(rawBoundary), durationMs: 2 },
  ]);
  const rollupBoundary = now.getTime() - 400 * 24 * HOUR;
  await sql`insert into phase_rollups (kind, phase, period, start, samples, total_ms, max_ms) values
    ('build', 'run', 'minute', ${new Date(rollupBoundary - 60_000)}, 1, 1, 1), ('build', 'run', 'minute', ${new Date(rollupBoundary)}, 1, 1, 1),
    ('build', 'run', 'hour', ${new Date(rollupBoundary - HOUR)}, 1, 1, 1), ('build', 'run', 'hour', ${new Date(rollupBoundary)}, 1, 1, 1),
    ('build', 'run', 'day', ${new Date(rollupBoundary - 24 * HOUR)}, 1, 1, 1), ('build', 'run', 'week', ${new Date(rollupBoundary - 7 * 24 * HOUR)}, 1, 1, 1)`;
  const { deleted } = await rollUpAndPrune(sql, { 'metrics.retention.rawDays': 14, 'metrics.retention.rollupDays': 400 }, now);
  t.equal(deleted, 3, 'one raw sample, one minute and one hour rollup');
  t.same((await sql<{ ended_at: Date }[]>`select ended_at from phase_samples`).map((r) => r.ended_at.getTime()), [rawBoundary]);
  const minutesAndHours = await sql<{ period: string; start: Date }[]>`
    select period, start from phase_rollups where period in ('minute', 'hour') and start <= ${new Date(rollupBoundary)} order by period`;
  t.same(minutesAndHours.map((r) => [r.period, r.start.getTime()]), [['hour', rollupBoundary], ['minute', rollupBoundary]], 'the rollups at the boundary stay');
  const kept = await sql`select 1 from phase_rollups where (period = 'day' and start = ${new Date(rollupBoundary - 24 * HOUR)})
    or (period = 'week' and start = ${new Date(rollupBoundary - 7 * 24 * HOUR)})`;
  t.equal(kept.count, 2, 'days and weeks stay forever');
  t.equal(await prunePhases(sql, { rawBefore: null, rollupBefore: null }), 0, '0 days keeps everything');
});

t.test('a flush writes the buffered samples with the injected clock\'s time; a failed flush keeps them', async (t) => {
  const { sql } = await testDatabase(t);
  let now = new Date(DAY + 5 * HOUR);
  const buffer = new PhaseSampleBuffer(() => now);
  buffer.record('evaluation', 'dispatch', 1.5);
  now = new Date(DAY + 6 * HOUR);
  buffer.record('build', 'run', 0.25);
  buffer.record('build', 'run', Number.NaN);
  const failing = Object.assign((() => Promise.reject(new Error('database away'))) as unknown as typeof sql, { json: sql.json.bind(sql) });
  await t.rejects(flushPhases(failing, buffer));
  t.same(await flushPhases(sql, buffer), { samples: 2 }, 'the failed flush\'s samples are written by the next');
  t.same(await flushPhases(sql, buffer), { samples: 0 });
  const rows = await sql<{ kind: string; phase: string; ended_at: Date; duration_ms: string }[]>`select kind, phase, ended_at, duration_ms from phase_samples order by ended_at`;
  t.same(rows.map((r) => [r.kind, r.phase, r.ended_at.toISOString(), Number(r.duration_ms)]), [
    ['evaluation', 'dispatch', '2026-11-23T05:00:00.000Z', 1500], ['build', 'run', '2026-11-23T06:00:00.000Z', 250],
  ]);
});

t.test('samples of one kind, phase and second are one row: the rollups count, sum and take the longest of them all', async (t) => {
  const { sql } = await testDatabase(t);
  let now = new Date(DAY + 5 * HOUR + 100);
  const buffer = new PhaseSampleBuffer(() => now);
  for (const seconds of [0.5, 2, 1]) buffer.record('build', 'dispatch', seconds);
  buffer.record('build', 'run', 3);
  now = new Date(DAY + 5 * HOUR + 999);
  buffer.record('build', 'dispatch', 0.25);
  now = new Date(DAY + 5 * HOUR + 1000);
  buffer.record('build', 'dispatch', 4);
  t.same(await flushPhases(sql, buffer), { samples: 6 });
  const rows = await sql<{ phase: string; ended_at: Date; samples: number; duration_ms: string; max_ms: string }[]>`
    select phase, ended_at, samples, duration_ms, max_ms from phase_samples order by ended_at, phase`;
  t.same(rows.map((r) => [r.phase, r.ended_at.getTime() - DAY - 5 * HOUR, r.samples, Number(r.duration_ms), Number(r.max_ms)]), [
    ['dispatch', 0, 4, 3750, 2000], ['run', 0, 1, 3000, 3000], ['dispatch', 1000, 1, 4000, 4000],
  ], 'a row per kind, phase and second');
  // a row written before the sums (one sample, no max_ms) still counts as one
  await sql`insert into phase_samples (kind, phase, ended_at, duration_ms) values ('build', 'dispatch', ${new Date(DAY + 5 * HOUR + 30_000)}, 7000)`;
  await rollUpPhases(sql);
  const [minute] = (await phaseSeries(sql, 'minute', new Date(DAY), new Date(DAY + 24 * HOUR), 100)).filter((p) => p.phase === 'dispatch');
  t.same(minute, { kind: 'build', phase: 'dispatch', start: new Date(DAY + 5 * HOUR), samples: 6, totalMs: 14_750, maxMs: 7000 });
});

t.test('a failed flush\'s rows are summed with the samples recorded since', async (t) => {
  const { sql } = await testDatabase(t);
  const now = new Date(DAY);
  const buffer = new PhaseSampleBuffer(() => now);
  buffer.record('build', 'run', 1);
  const failing = Object.assign((() => Promise.reject(new Error('database away'))) as unknown as typeof sql, { json: sql.json.bind(sql) });
  await t.rejects(flushPhases(failing, buffer));
  buffer.record('build', 'run', 5);
  t.same(await flushPhases(sql, buffer), { samples: 2 });
  const rows = await sql<{ samples: number; duration_ms: string; max_ms: string }[]>`select samples, duration_ms, max_ms from phase_samples`;
  t.same(rows.map((r) => [r.samples, Number(r.duration_ms), Number(r.max_ms)]), [[2, 6000, 5000]]);
});
