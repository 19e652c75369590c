import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { openDatabase, readMigrations } from '../../../storage/index.js';
import { testDatabase } from '../../support/db.js';
import { captureLog } from '../fixtures/captureLog.js';
import { dbConfig } from '../fixtures/dbConfig.js';

t.test('an external database: three pools, warmed, migrated, closed', async (t) => {
  const { url, sql } = await testDatabase(t, { migrated: false });
  const { log, messages } = captureLog();
  const db = await openDatabase(dbConfig({ 'database.url': url }), log);
  t.equal(db.url, url);
  const pools = await sql<{ app: string; n: number }[]>`
    select application_name as app, count(*)::int as n from pg_stat_activity
    where datname = current_database() and application_name like 'kiln-%' group by 1 order by 1`;
  t.same(pools, [{ app: 'kiln-cache', n: 1 }, { app: 'kiln-scheduler', n: 2 }, { app: 'kiln-web', n: 1 }], 'minConnections opened at start; a pool with min 0 still checks its connection once');
  const [cache] = await db.cache<{ app: string }[]>`select current_setting('application_name') as app`;
  t.equal(cache?.app, 'kiln-cache');
  for (const pool of [db.web, db.cache, db.scheduler]) {
    const [jit] = await pool<{ jit: string }[]>`select current_setting('jit') as jit`;
    t.equal(jit?.jit, 'off', 'no JIT in kiln\'s sessions (docs/database.md, "JIT")');
  }
  const applied = await sql<{ name: string }[]>`select name from schema_migrations`;
  t.same(applied.map((r) => r.name), (await readMigrations()).map((m) => m.name));
  t.ok(messages('info').includes('database ready'));

  // The test server runs PostgreSQL's default of 64 locks per transaction.
  const [locks] = await sql<{ n: number }[]>`select current_setting('max_locks_per_transaction')::int as n`;
  if ((locks?.n ?? 0) < 256) t.match(messages('warn').join('\n'), /max_locks_per_transaction is \d+, below the 256/);

  await db.close();
  await db.close(); // twice is harmless
  const left = await sql<{ n: number }[]>`select count(*)::int as n from pg_stat_activity where application_name like 'kiln-%' and datname = current_database()`;
  t.equal(left[0]?.n, 0, 'close() ended every pool');
});

t.test('migrate: false leaves the schema alone', async (t) => {
  const { url, sql } = await testDatabase(t, { migrated: false });
  const db = await openDatabase(dbConfig({ 'database.url': url }), captureLog().log, { migrate: false });
  await db.close();
  const [row] = await sql<{ exists: boolean }[]>`select to_regclass('schema_migrations') is not null as exists`;
  t.equal(row?.exists, false);
});

t.test('pools larger than the server allows are reported', async (t) => {
  const { url } = await testDatabase(t);
  const { log, messages } = captureLog();
  const db = await openDatabase(dbConfig({ 'database.url': url, 'database.cache.maxConnections': 1000 }), log);
  await db.close();
  t.match(messages('warn').join('\n'), /kiln's three pools may open 1005; raise max_connections/);
});

t.test('the default socket with nothing listening names both ways out', async (t) => {
  const socketDir = await mkdtemp(join(tmpdir(), 'kiln-no-server-'));
  t.teardown(() => rm(socketDir, { recursive: true, force: true }));
  const config = dbConfig({ 'database.url': `postgres://kiln@/kiln?host=${socketDir}` });
  await t.rejects(openDatabase(config, captureLog().log, { urlIsDefault: true }), {
    message: new RegExp(
      `could not connect to PostgreSQL at the default database\\.url, the Unix socket ${socketDir}/\\.s\\.PGSQL\\.5432 .*` +
        'no server is listening there.*database\\.url \\(environment SERVICE_DATABASE_URL, or database\\.urlFile\\).*localDb\\.enable = true',
    ),
  });
});

t.test('an explicit URL that does not answer names that URL, not the defaults', async (t) => {
  const config = dbConfig({ 'database.url': 'postgres://kiln:secret@127.0.0.1:1/kiln', 'localDb.enable': true });
  const { log, messages } = captureLog();
  const error = await openDatabase(config, log).then(() => undefined, (e: unknown) => e);
  t.match(error, { message: /^could not connect to PostgreSQL at database\.url, 127\.0\.0\.1:1 \(role "kiln", database "kiln"\): the connection was refused/ });
  t.notMatch(String(error), /secret|localDb/);
  t.same(messages('warn'), ['database.url is set, so localDb.enable is ignored and no embedded PostgreSQL is started']);
});

t.test('a server that refuses the role is reported with its own words', async (t) => {
  const { url } = await testDatabase(t);
  const wrongRole = new URL(url);
  wrongRole.username = 'no_such_role';
  await t.rejects(openDatabase(dbConfig({ 'database.url': wrongRole.toString() }), captureLog().log), {
    message: /could not connect to PostgreSQL at database\.url, 127\.0\.0\.1:5432 .*role "no_such_role" does not exist/,
  });
});

t.test('a malformed URL fails before connecting', async (t) => {
  await t.rejects(openDatabase(dbConfig({ 'database.url': 'mysql://x' }), captureLog().log), { message: /^database\.url: expected/ });
});
