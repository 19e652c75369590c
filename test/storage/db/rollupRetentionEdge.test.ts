// The rollup passes at the retention edge (storage/db/rollupEdge.ts, docs/metrics.md) on a real
// database, with the pass's clock injected: on an idle instance (nothing new for rawDays) the
// retention pass deletes a period's raw rows a few at a time as its cutoff sweeps through, and a
// short rollupDays deletes a day's first hours while the day is still inside the day level's
// lookback. Neither may shrink a rollup: each pass must leave the minute, hour, day and week rows
// of the cache traffic, the job phases and the instance window exactly as the first pass made them.
import { randomBytes } from 'node:crypto';
import type { Sql } from 'postgres';
import t from 'tap';
import { addPhaseSamples, addTrafficMinutes, insertCache } from '../../../storage/index.js';
import { rollUpAndPrune } from '../../../services/metrics/index.js';
import { testDatabase } from '../../support/db.js';

const DAY = Date.parse('2026-11-23T00:00:00Z'); // a Monday
const MINUTE = 60_000;
const HOUR = 3_600_000;
const DAYS = 24 * HOUR;

const retention = (rawDays: number, rollupDays: number) => ({ 'metrics.retention.rawDays': rawDays, 'metrics.retention.rollupDays': rollupDays });

/** Every day and week rollup, and the minute and hour rollups from `since` on, of the three sources, as text to compare. */
async function rollups(sql: Sql, since: number): Promise<string[]> {
  const from = new Date(since);
  const rows = await sql<{ row: string }[]>`
    select concat_ws(' ', 'traffic', period, to_char(start at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS'), narinfo_hits, narinfo_misses, upstream_hits, nar_bytes_served) as row
      from cache_traffic_rollups where period in ('day', 'week') or start >= ${from}
    union all select concat_ws(' ', 'phase', kind, phase, period, to_char(start at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS'), samples, total_ms, max_ms)
      from phase_rollups where period in ('day', 'week') or start >= ${from}
    union all select concat_ws(' ', 'instance', metric, period, to_char(start at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS'), samples, total, least_value, greatest_value)
      from sample_rollups where period in ('day', 'week') or start >= ${from}
    order by 1`;
  return rows.map((r) => r.row);
}

async function instanceRow(sql: Sql, at: number, builds: number): Promise<void> {
  await sql`
    insert into instance_samples (sampled_at, workers_connected, build_slots, builds_running, eval_slots, evals_running, builds_queued, evaluations_queued, evaluations_open)
    values (${new Date(at)}, 1, 4, ${builds}, 1, 0, 0, 0, 0)`;
}

t.test('an idle instance: raw rows deleted as the cutoff sweeps through their minute and hour shrink no rollup', async (t) => {
  const { sql } = await testDatabase(t);
  const cache = await insertCache(sql, { name: 'edge', description: '', public: true, priority: 40, owner_id: null, key_name: 'test-edge-1', public_key: randomBytes(32), secret_key: randomBytes(64) });
  const at = DAY + 10 * HOUR;
  // The last activity ever: two rows in the minute 10:00 (at :10 and :50) of the phases and the
  // instance window, traffic in the minutes 10:00 and 10:30.
  await addPhaseSamples(sql, [
    { kind: 'build', phase: 'run', endedAt: new Date(at + 10_000), durationMs: 1 },
    { kind: 'build', phase: 'run', endedAt: new Date(at + 50_000), durationMs: 2 },
  ]);
  await instanceRow(sql, at + 10_000, 1);
  await instanceRow(sql, at + 50_000, 2);
  const traffic = (minute: number, hits: number) => ({ cacheId: cache, minute: new Date(minute), narinfoHits: hits, narinfoMisses: 0, upstreamHits: 0, narBytesServed: 10 * hits });
  await addTrafficMinutes(sql, [traffic(at, 1), traffic(at + 30 * MINUTE, 2)]);

  await rollUpAndPrune(sql, retention(14, 400), new Date(at + HOUR));
  const made = await rollups(sql, DAY);
  t.ok(made.includes(`phase build run minute ${new Date(at).toISOString().slice(0, 19)} 2 3 2`), 'the first pass rolled up both samples', { made });

  // 14 days on, the raw cutoff passes :10 (one phase and instance row go), then 10:00 (the first
  // traffic minute), then the rest; every pass rolls up before it prunes, as in production.
  for (const past of [30_000, 15 * MINUTE, 45 * MINUTE, 2 * HOUR]) {
    const now = at + 14 * DAYS + past;
    // The instance window's own pass deletes its raw rows (services/metrics/instanceWindow.ts),
    // here as another process whose clock is 20 s ahead would.
    await sql`delete from instance_samples where sampled_at < ${new Date(now + 20_000 - 14 * DAYS)}`;
    const report = await rollUpAndPrune(sql, retention(14, 400), new Date(now));
    t.same(await rollups(sql, DAY), made, `cutoff 10:00 + ${past / 1000} s (${report.deleted} rows deleted): every rollup as it was`);
  }
  t.equal((await sql`select 1 from phase_samples union all select 1 from instance_samples union all select 1 from cache_traffic_minutes`).count, 0, 'the raw rows are gone');
});

t.test('rollupDays 1: hours are kept while their day is in the lookback, and deleting them later shrinks no day or week', async (t) => {
  const { sql } = await testDatabase(t);
  const cache = await insertCache(sql, { name: 'short', description: '', public: true, priority: 40, owner_id: null, key_name: 'test-short-1', public_key: randomBytes(32), secret_key: randomBytes(64) });
  // One row an hour of each source over the day, nothing after.
  for (let h = 0; h < 24; h++) {
    await addPhaseSamples(sql, [{ kind: 'evaluation', phase: 'dispatch', endedAt: new Date(DAY + h * HOUR + 1000), durationMs: h + 1 }]);
    await instanceRow(sql, DAY + h * HOUR + 1000, h);
    await addTrafficMinutes(sql, [{ cacheId: cache, minute: new Date(DAY + h * HOUR), narinfoHits: h + 1, narinfoMisses: 1, upstreamHits: 0, narBytesServed: 0 }]);
  }
  await rollUpAndPrune(sql, retention(14, 1), new Date(DAY + 24 * HOUR + 30 * MINUTE));
  const days = async () => (await rollups(sql, Date.parse('2100-01-01T00:00:00Z')));
  const made = await days();
  t.ok(made.includes(`phase evaluation dispatch day ${new Date(DAY).toISOString().slice(0, 19)} 24 300 24`), 'the first pass made the whole day', { made });
  // The next day the hours stay (the floor: two days and an hour); the day after, the cutoff
  // sweeps through them while the day level still looks back to the day (no newer day exists).
  const dayHours = () => sql`select 1 from phase_rollups where period = 'hour' and start >= ${new Date(DAY)} and start < ${new Date(DAY + 24 * HOUR)}`;
  await rollUpAndPrune(sql, retention(14, 1), new Date(DAY + 47 * HOUR));
  t.equal((await dayHours()).count, 24, 'a day later every hour of the day is still there');
  for (const hour of [5, 11, 23]) {
    const report = await rollUpAndPrune(sql, retention(14, 1), new Date(DAY + 48 * HOUR + hour * HOUR + 30 * MINUTE));
    t.same(await days(), made, `two days on, at ${hour}:30 (${report.deleted} rows deleted): the day and week as they were`);
  }
  t.equal((await sql`select 1 from phase_rollups where period in ('minute', 'hour') and start < ${new Date(DAY + 23 * HOUR)}`).count, 0, 'the day\'s hours did go');
});
