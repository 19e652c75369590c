// A transaction whose `begin` goes out with its first statement (storage/db/pipelinedTransaction.ts),
// against a real PostgreSQL: the first statement is inside the transaction, the writes are seen
// only once committed, and a failure (thrown by the function, or a statement error it caught)
// leaves nothing written and the connection free.
import t from 'tap';
import postgres from 'postgres';
import { copyInto, copyRow, pipelinedTransaction } from '../../../storage/db/index.js';
import { testDatabase } from '../../support/db.js';
import { eventually } from '../../support/eventually.js';

t.test('a pipelined transaction', async (t) => {
  const { sql, url } = await testDatabase(t, { migrated: false });
  await sql`create table pipelined (id int primary key)`;
  const ids = async () => (await sql<{ id: number }[]>`select id from pipelined order by id`).map((r) => r.id);

  await t.test('its first statement runs inside it; its writes are seen once it committed', async (t) => {
    const value = await pipelinedTransaction(sql, async (tx) => {
      const [first] = await tx<{ at: Date; xid: string }[]>`select now() as at, txid_current()::text as xid`;
      await tx`insert into pipelined values (1)`;
      t.same(await ids(), [], 'another session does not see the row before the commit');
      const [last] = await tx<{ at: Date; xid: string }[]>`select now() as at, txid_current()::text as xid`;
      t.same(last, first, 'one transaction from the first statement on');
      return 'done';
    });
    t.equal(value, 'done');
    t.same(await ids(), [1]);
  });

  await t.test('genericPlans: cached generic plans for this transaction only, begun with its first statement', async (t) => {
    const setting = (q: typeof sql) => q<{ mode: string; xid: string }[]>`select current_setting('plan_cache_mode') as mode, txid_current()::text as xid`;
    await pipelinedTransaction(sql, async (tx) => {
      const [first] = await setting(tx as unknown as typeof sql);
      await tx`insert into pipelined values (5)`;
      const [last] = await setting(tx as unknown as typeof sql);
      t.equal(first!.mode, 'force_generic_plan');
      t.same(last, first, 'one transaction from the first statement on');
    }, { genericPlans: true });
    t.same(await ids(), [1, 5]);
    await sql`delete from pipelined where id = 5`;
    // every connection of the pool back to PostgreSQL's default once the transaction ended
    const modes = await Promise.all([1, 2, 3, 4].map(() => pipelinedTransaction(sql, async (tx) => (await setting(tx as unknown as typeof sql))[0]!.mode)));
    t.same(modes, ['auto', 'auto', 'auto', 'auto']);
  });

  await t.test('the function throws: nothing is written', async (t) => {
    await t.rejects(pipelinedTransaction(sql, async (tx) => {
      await tx`insert into pipelined values (2)`;
      throw new Error('changed my mind');
    }), /changed my mind/);
    t.same(await ids(), [1]);
  });

  await t.test('a statement error the function caught still rolls back, and throws', async (t) => {
    await t.rejects(pipelinedTransaction(sql, async (tx) => {
      await tx`insert into pipelined values (3)`;
      await tx`insert into pipelined values (1)`.catch(() => undefined); // duplicate key, swallowed
    }), /rolled back/);
    t.same(await ids(), [1], 'the row written before the error is gone too');
  });

  await t.test('the connection is released each time: more transactions than the pool has connections', async (t) => {
    for (let i = 10; i < 30; i++) await pipelinedTransaction(sql, async (tx) => tx`insert into pipelined values (${i})`);
    await t.rejects(pipelinedTransaction(sql, async () => Promise.reject(new Error('no'))));
    t.equal((await ids()).length, 21);
  });

  await t.test('the connection dies mid-transaction: an error, no crash, and the pool goes on', async (t) => {
    for (let round = 0; round < 3; round++) {
      await t.rejects(pipelinedTransaction(sql, async (tx) => {
        await tx`insert into pipelined values (${100 + round})`;
        await tx`select pg_terminate_backend(pg_backend_pid())`;
      }), /terminat|CONNECTION_CLOSED/i, 'the killed session\'s error');
      // a rollback written to the dead socket threw from a timer and ended the process (postgres.js 3.4)
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    t.equal((await ids()).length, 21, 'nothing of the killed transactions was written');
    await pipelinedTransaction(sql, async (tx) => tx`insert into pipelined values (200)`);
    t.equal((await ids()).length, 22, 'the pool reconnects for the next transaction');
  });

  await t.test('a statement issued after the connection died is refused: no crash, no other session, and the pool goes on', async (t) => {
    // postgres.js 3.4.9 wrote it to the gone socket from a timer, which ended the process, or, once
    // the pool had reconnected that connection, into another session (bin/patchPostgres.js)
    const killer = postgres(url, { max: 1, onnotice: () => undefined });
    t.teardown(() => killer.end());
    const kill = async (pid: number) => {
      await killer`select pg_terminate_backend(${pid})`;
      await eventually(async () => (await killer`select 1 from pg_stat_activity where pid = ${pid}`).length === 0, { message: 'the backend is gone' });
      await new Promise((resolve) => setTimeout(resolve, 50)); // and its socket's close read by this process
    };
    const lost = /CONNECTION_CLOSED|terminat|ECONNRESET/;
    for (let round = 0; round < 3; round++) {
      await t.rejects(pipelinedTransaction(sql, async (tx) => {
        const { pid } = (await tx<{ pid: number }[]>`select pg_backend_pid() as pid`)[0]!;
        await tx`insert into pipelined values (${300 + round})`;
        await kill(pid);
        await tx`insert into pipelined values (${310 + round})`;
      }), lost, 'a pipelined transaction');
      await t.rejects(sql.begin(async (tx) => {
        const { pid } = (await tx<{ pid: number }[]>`select pg_backend_pid() as pid`)[0]!;
        await tx`insert into pipelined values (${320 + round})`;
        await kill(pid);
        await tx`insert into pipelined values (${330 + round})`;
      }), lost, 'sql.begin');
    }
    await t.rejects(pipelinedTransaction(sql, async (tx) => {
      const { pid } = (await tx<{ pid: number }[]>`select pg_backend_pid() as pid`)[0]!;
      // review r5c-5: the session ends between a COPY's end and the statement behind it, the only one that reports the COPY's fate
      await copyInto(tx, 'pipelined', ['id'], copyRow([340]), async () => {
        await kill(pid);
        return tx`select 1`;
      });
    }), lost, 'between a COPY and its follower');
    t.same((await ids()).filter((id) => id >= 300), [], 'nothing of the killed transactions was written');
    for (let i = 0; i < 8; i++) await pipelinedTransaction(sql, async (tx) => tx`insert into pipelined values (${400 + i})`);
    t.equal((await ids()).filter((id) => id >= 400).length, 8, 'the pool serves transactions after');
  });
});
