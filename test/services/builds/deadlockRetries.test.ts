// The graph's transactions that PostgreSQL rolls back for a deadlock run again (graphRecorder.ts
// mayRunAgain): a recording, and an evaluation's move to building, each against a second session
// that takes the same rows in the other order. Split from tenantScope.test.ts.
import { randomUUID } from 'node:crypto';
import t, { type Test } from 'tap';
import postgres, { type TransactionSql } from 'postgres';
import { PROTOCOL_VERSION, type MessageOf } from '../../../protocol/index.js';
import { changePhase } from '../../../services/builds/evaluationPhases.js';
import { recordEvalBatch } from '../../../services/builds/graphRecorder.js';
import { testDatabase } from '../../support/db.js';
import { derivationNode, type DerivationNodeFixture } from '../../support/derivationNodes.js';
import { insertProject } from '../../support/modelRows.js';
import { testEvents } from '../../support/testEvents.js';

t.test('a recording rolled back for a deadlock runs again', async (t) => {
  const db = await testDatabase(t);
  const { events } = await testEvents(t, db);
  const project = await insertProject(db.sql, 'acme', 'app');
  const [task] = await db.sql<{ id: string }[]>`insert into tasks (project_id, name) values (${project}, 'default') returning id`;
  const evaluationOf = async () => {
    const id = randomUUID();
    await db.sql`insert into evaluations (id, task_id, repository, wildcard, phase) values (${id}, ${task!.id}, 'file:///nonexistent', '*', 'evaluating')`;
    return id;
  };
  const batch = (evaluationId: string, nodes: ReturnType<typeof derivationNode>[]): MessageOf<'evalBatch'> =>
    ({ v: PROTOCOL_VERSION, t: 'evalBatch', jobId: `eval:${evaluationId}:1`, derivations: nodes.map((n) => n.derivation), attributes: [], errors: [] });
  const input = derivationNode('input');
  const first = await evaluationOf();
  await recordEvalBatch(events, first, batch(first, [input]));
  const top = derivationNode('top', [input.drvPath]);

  // Another transaction holds the input's build, then inserts the derivation the recording has just
  // inserted: each waits for the other. Its own deadlock check comes late, so the recording's
  // transaction is the one PostgreSQL rolls back.
  const { lockedNow, blocker } = deadlockPartner(t, db.url, input, async (tx) => {
    await tx`
      insert into derivations (drv_path, name, system, required_features, outputs, input_srcs, prefer_local_build, fixed_output)
      values (${top.drvPath}, 'top', 'x86_64-linux', '{}', '{}', '{}', false, false)`;
    throw new Error('rolled back on purpose');
  });
  await lockedNow;
  const second = await evaluationOf();
  const recorded = await recordEvalBatch(events, second, batch(second, [top]));
  t.match(String(await blocker), /rolled back on purpose/, 'the other transaction went on once the recording gave way');
  t.same(recorded, { derivations: 1 }, 'the recording ran again and was written');
  const [built] = await db.sql<{ n: number }[]>`select count(*)::int as n from derivation_builds db join derivations d on d.id = db.derivation_id where d.drv_path = ${top.drvPath}`;
  t.equal(built!.n, 1);
});

t.test('a move to building rolled back for a deadlock runs again', async (t) => {
  const db = await testDatabase(t);
  const { events } = await testEvents(t, db);
  const project = await insertProject(db.sql, 'acme', 'app');
  const [task] = await db.sql<{ id: string }[]>`insert into tasks (project_id, name) values (${project}, 'default') returning id`;
  const evaluationId = randomUUID();
  await db.sql`insert into evaluations (id, task_id, repository, wildcard, phase) values (${evaluationId}, ${task!.id}, 'file:///nonexistent', '*', 'evaluating')`;
  const running = derivationNode('running');
  await recordEvalBatch(events, evaluationId, { v: PROTOCOL_VERSION, t: 'evalBatch', jobId: `eval:${evaluationId}:1`, derivations: [running.derivation], attributes: [], errors: [] });
  // started (by another evaluation's worker): the claim share-locks it
  await db.sql`update derivation_builds db set status = 'started' from derivations d where d.id = db.derivation_id and d.drv_path = ${running.drvPath}`;

  // Another transaction holds that build, then updates the evaluation the move has just updated:
  // each waits for the other. Its own deadlock check comes late, so the move is rolled back.
  const { lockedNow, blocker } = deadlockPartner(t, db.url, running, (tx) => tx`update evaluations set updated_at = now() where id = ${evaluationId}`);
  await lockedNow;
  const moved = await changePhase(events, evaluationId, { event: { type: 'succeed' } });
  t.notMatch(String(await blocker), /Error/, 'the other transaction committed');
  t.equal(moved, true, 'the move ran again once the other transaction went on');
  const [row] = await db.sql<{ phase: string }[]>`select phase from evaluations where id = ${evaluationId}`;
  t.equal(row!.phase, 'building');
});

/**
 * Another session that takes `held`'s build for update, waits until some other session waits for a
 * lock (the statement under test, for that build), then runs `then`, which waits for what that
 * statement holds: a deadlock. Its own deadlock check comes late (60 s), so PostgreSQL rolls back
 * the statement under test. `blocker` settles with `then`'s transaction (its error, if any).
 */
function deadlockPartner(t: Pick<Test, 'teardown'>, url: string, held: DerivationNodeFixture, then: (tx: TransactionSql) => Promise<unknown>) {
  const other = postgres(url, { max: 1, onnotice: () => undefined });
  t.teardown(() => other.end());
  let locked!: () => void;
  const lockedNow = new Promise<void>((resolve) => (locked = resolve));
  const blocker = other.begin(async (tx) => {
    await tx`set local deadlock_timeout = '60s'`;
    await tx`select db.id from derivation_builds db join derivations d on d.id = db.derivation_id where d.drv_path = ${held.drvPath} for update of db`;
    locked();
    for (;;) {
      const [waiting] = await tx<{ n: number }[]>`
        select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and pid <> pg_backend_pid()`;
      if (waiting!.n > 0) break;
    }
    await then(tx);
  }).catch((e: unknown) => e);
  return { lockedNow, blocker };
}
