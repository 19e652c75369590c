// The liveness rule (storage/db/advisoryLocks.ts): a process is alive while the session holding
// its lease lives. Checked against a real PostgreSQL: held, released, and a session that ends
// without releasing (as when a process is killed) all read as they should from another session.
import postgres from 'postgres';
import t from 'tap';
import { acquireInstanceLease, leaseHeldCondition, leaseLostCondition, trySessionLock } from '../../../storage/index.js';
import { testDatabase } from '../../support/db.js';

t.test('an instance lease reads as held while its session lives, and lost after', async (t) => {
  const { url, sql } = await testDatabase(t, { migrated: false });
  const held = async (key: number) => (await sql<{ held: boolean }[]>`
    select ${leaseHeldCondition(sql, sql`${key}::int`)} as held, ${leaseLostCondition(sql, sql`${key}::int`)} as lost`)[0]!;

  const own = postgres(url, { max: 1, onnotice: () => undefined });
  t.teardown(() => own.end({ timeout: 5 }));
  const lease = await acquireInstanceLease(own);
  t.match(await held(lease.key), { held: true, lost: false }, 'held, seen from another session');
  t.match(await held(lease.key + 1), { held: false, lost: true }, 'a key nobody holds is lost');
  await lease.release();
  t.match(await held(lease.key), { held: false, lost: true }, 'released');

  const dying = postgres(url, { max: 1, onnotice: () => undefined });
  const killed = await acquireInstanceLease(dying);
  t.equal((await held(killed.key)).held, true);
  // the process dies without releasing: its session ends (the call waits until it has)
  await sql`select pg_terminate_backend(pid, 5000) from pg_locks where locktype = 'advisory' and objid = ${killed.key}::int::oid and objsubid = 2`;
  t.match(await held(killed.key), { held: false, lost: true }, 'lost as soon as the session ends');
  await dying.end({ timeout: 5 }).catch(() => undefined);
});

t.test('a session lock has one holder at a time', async (t) => {
  const { sql } = await testDatabase(t, { migrated: false });
  const key = { single: 424_242 };
  const first = await trySessionLock(sql, key);
  t.ok(first, 'the first taker holds it');
  t.equal(await trySessionLock(sql, key), null, 'a second taker does not, even on the same pool');
  await first!.release();
  await first!.release();
  const second = await trySessionLock(sql, key);
  t.ok(second, 'free again once released (twice is harmless)');
  await second!.release();
});
