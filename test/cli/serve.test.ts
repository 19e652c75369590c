import t from 'tap';
import { startTestKiln } from '../support/kiln.js';

t.test('a whole server on PostgreSQL at 127.0.0.1:5432', async (t) => {
  const kiln = await startTestKiln(t);
  const health = await kiln.api<{ status: string }>('GET', '/health');
  t.equal(health.status, 200);
  t.equal(health.message.status, 'ok');
  const config = await kiln.api<Record<string, unknown>>('GET', '/config');
  t.equal(config.message['registration'], true);
  t.equal(config.message['max_request_size'], 2097152);
  const actors = await kiln.api('GET', '/admin/actors');
  t.equal(actors.status, 401, 'the actor tree needs a superuser');
  const migrations = await kiln.sql<{ name: string }[]>`select name from schema_migrations order by name`;
  t.ok(migrations.length >= 2, 'migrations applied');
});
