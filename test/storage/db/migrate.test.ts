import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import t, { type Test } from 'tap';
import { migrate, readMigrations } from '../../../storage/index.js';
import { testDatabase } from '../../support/db.js';
import { eventually } from '../../support/eventually.js';

const scratchDir = async (t: Pick<Test, 'teardown'>): Promise<string> => {
  const dir = await mkdtemp(join(tmpdir(), 'kiln-migrations-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
};
const migrationNames = async (): Promise<string[]> => (await readMigrations()).map((m) => m.name);

t.test('a fresh database gets every migration, once', async (t) => {
  const { sql } = await testDatabase(t, { migrated: false });
  t.same(await migrate(sql), { applied: await migrationNames() });
  t.same(await migrate(sql), { applied: [] }, 'a second run applies nothing');
  const rows = await sql<{ name: string; checksum: string }[]>`select name, checksum from schema_migrations order by name`;
  t.same(rows.map((r) => r.name), await migrationNames());
  t.match(rows[0]?.checksum, /^[0-9a-f]{64}$/);
  await sql`insert into instance_secrets (name, value) values ('jwt', ${Buffer.from('k')})`;
  await t.rejects(sql`insert into instance_secrets (name, value) values ('Bad Name', ${Buffer.from('k')})`, { code: '23514' });
});

t.test('two processes migrating at once both succeed and the migrations run once', async (t) => {
  const { url } = await testDatabase(t, { migrated: false });
  // Two separate pools, as two kiln processes would have.
  const a = postgres(url, { max: 2, onnotice: () => undefined });
  const b = postgres(url, { max: 2, onnotice: () => undefined });
  t.teardown(() => Promise.all([a.end(), b.end()]));
  const [ra, rb] = await Promise.all([migrate(a), migrate(b)]);
  t.same([...ra.applied, ...rb.applied].sort(), await migrationNames(), 'each migration applied by exactly one of them');
  const [count] = await a<{ n: number }[]>`select count(*)::int as n from schema_migrations`;
  t.equal(count?.n, (await migrationNames()).length);
});

t.test('an applied migration whose file changed is an error naming the file', async (t) => {
  const { sql } = await testDatabase(t);
  await sql`update schema_migrations set checksum = repeat('0', 64) where name = '0001_foundation.sql'`;
  await t.rejects(migrate(sql), { message: /migration 0001_foundation\.sql was changed after it was applied/ });
});

t.test('a migration the files do not have (a newer kiln ran) is an error', async (t) => {
  const { sql } = await testDatabase(t);
  await sql`insert into schema_migrations (name, checksum) values ('9999_from_the_future.sql', 'x')`;
  await t.rejects(migrate(sql), { message: /has migration 9999_from_the_future\.sql applied, which this kiln does not have/ });
});

t.test('a directory of its own: order, failure and rollback, misnamed files', async (t) => {
  const dir = await scratchDir(t);
  const { sql } = await testDatabase(t, { migrated: false });
  await writeFile(join(dir, '0001_a.sql'), 'create table a (id int);\ncreate table a2 (id int);\n');
  await writeFile(join(dir, '0002_b.sql'), 'create table b (id int); select 1/0;');
  await writeFile(join(dir, 'README.md'), 'not a migration');
  await t.rejects(migrate(sql, { directory: dir }), { message: /migration 0002_b\.sql failed and was rolled back: division by zero/ });
  const tables = await sql<{ t: string }[]>`select tablename as t from pg_tables where schemaname = 'public' order by 1`;
  t.same(tables.map((r) => r.t), ['a', 'a2', 'schema_migrations'], '0001 committed, 0002 left nothing behind');

  await writeFile(join(dir, '0002_b.sql'), 'create table b (id int);');
  t.same(await migrate(sql, { directory: dir }), { applied: ['0002_b.sql'] });

  await writeFile(join(dir, '0003_c.sql'), '');
  await writeFile(join(dir, '0004_d.sql'), '');
  await sql`insert into schema_migrations (name, checksum) select '0004_d.sql', checksum from schema_migrations where name = '0002_b.sql'`;
  await sql`update schema_migrations set checksum = encode(sha256(''::bytea), 'hex') where name = '0004_d.sql'`;
  await t.rejects(migrate(sql, { directory: dir }), { message: /migration 0003_c\.sql is not applied but a later-numbered one is/ });

  const bad = await scratchDir(t);
  await writeFile(join(bad, '1_Oops.sql'), '');
  await t.rejects(readMigrations(bad), { message: /migration file 1_Oops\.sql .* is misnamed/ });
  const twins = await scratchDir(t);
  await writeFile(join(twins, '0001_a.sql'), '');
  await writeFile(join(twins, '0001_b.sql'), '');
  await t.rejects(readMigrations(twins), { message: /0001_a\.sql and 0001_b\.sql .* share the number 0001/ });
  await t.rejects(readMigrations(join(bad, 'missing')), { message: /cannot read the migrations directory/ });
});

t.test('the lock: a second migrator waits for the first and says so', async (t) => {
  const { url, sql } = await testDatabase(t);
  const holder = postgres(url, { max: 1, onnotice: () => undefined });
  t.teardown(() => holder.end());
  await holder`select pg_advisory_lock(hashtextextended('kiln.schema_migrations', 0))`;
  const said: string[] = [];
  const log = { info: (msg: string) => void said.push(msg) } as unknown as import('pino').Logger;
  const waiting = migrate(sql, { log });
  await eventually(() => said.length > 0, { interval: 10, message: 'the second migrator says it waits' });
  t.same(said, ['waiting for another process to finish migrating the database']);
  await holder`select pg_advisory_unlock(hashtextextended('kiln.schema_migrations', 0))`;
  t.same(await waiting, { applied: [] });
});
