import t from 'tap';
import { startQueue, stopQueue } from '../../../storage/index.js';
import { testDatabase } from '../../support/db.js';
import { captureLog } from '../fixtures/captureLog.js';
import { eventually } from '../../support/eventually.js';

t.test('pg-boss starts on a kiln database, runs a job, and stops gracefully', async (t) => {
  const { url, sql } = await testDatabase(t);
  // The test databases' template holds pg-boss's schema already (test/support/db.ts): drop it, so
  // that this start is a first one.
  await sql`drop schema pgboss cascade`;
  const pgbossSchema = async () => (await sql<{ exists: boolean }[]>`select exists (select from pg_namespace where nspname = 'pgboss') as exists`)[0]?.exists;
  t.equal(await pgbossSchema(), false, 'no pg-boss schema before the first start');
  const { log, messages } = captureLog();
  const boss = await startQueue(url, log, { maxConnections: 2 });
  t.ok(messages('info').includes('job queue started'));
  t.equal(await pgbossSchema(), true, 'pg-boss installed its own schema beside kiln’s tables');

  await boss.createQueue('kiln-test');
  const id = await boss.send('kiln-test', { hello: 'world' });
  const [job] = await boss.fetch<{ hello: string }>('kiln-test');
  t.equal(job?.id, id);
  t.same(job?.data, { hello: 'world' });
  await boss.complete('kiln-test', id ?? '');

  const [conns] = await sql<{ n: number }[]>`select count(*)::int as n from pg_stat_activity where application_name = 'kiln-queue' and datname = current_database()`;
  t.ok((conns?.n ?? 0) >= 1, 'its connections say who they are');
  await stopQueue(boss, { timeoutMs: 5000 });
  // A closed client's backend leaves pg_stat_activity a moment later: look until it has gone.
  const remaining = await eventually(async () => (await sql<{ n: number }[]>`select count(*)::int as n from pg_stat_activity where application_name = 'kiln-queue' and datname = current_database()`)[0]?.n,
    { until: (n) => n === 0, interval: 50, message: 'the queue\'s backends leave pg_stat_activity' });
  t.equal(remaining, 0, 'stopQueue closed its pool');
});

t.test('a queue on an unreachable database fails to start', async (t) => {
  await t.rejects(startQueue('postgres://kiln@127.0.0.1:1/kiln', captureLog().log));
});
