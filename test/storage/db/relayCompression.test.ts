// Migration 0080: the PostgreSQL relay's rows (a turn's events, ~3 KB per dispatched build) are
// compressed with lz4, several times cheaper than pglz (bench/README.md, dispatch, h49), where the
// server was built with it, as this one is.
import t from 'tap';
import { testDatabase } from '../../support/db.js';

t.test('event_relay.payload is compressed with lz4', async (t) => {
  const { sql } = await testDatabase(t);
  const [row] = await sql<{ compression: string }[]>`
    select attcompression::text as compression from pg_attribute where attrelid = 'event_relay'::regclass and attname = 'payload'`;
  // this server was built with lz4 (Debian's PostgreSQL 15); one without it keeps pglz (the migration says why)
  const [lz4] = await sql<{ available: boolean }[]>`select exists (select 1 from pg_settings where name = 'default_toast_compression' and 'lz4' = any(enumvals)) as available`;
  t.ok(lz4?.available, 'this PostgreSQL has lz4');
  t.equal(row?.compression, 'l');
  const payload = JSON.stringify(Array.from({ length: 200 }, (_, i) => ({ e: 'build.completed', i, f: 'x'.repeat(100) })));
  const [inserted] = await sql<{ id: string }[]>`insert into event_relay (payload) values (${payload}) returning id`;
  const [relayed] = await sql<{ method: string }[]>`select pg_column_compression(payload) as method from event_relay where id = ${inserted!.id}`;
  t.equal(relayed?.method, 'lz4', 'a relayed turn is stored lz4-compressed');
});
