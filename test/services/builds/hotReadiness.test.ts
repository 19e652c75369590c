// Readiness moves are HOT updates (migration 0082, docs/builds.md "The scheduler's data
// structures"): a move that leaves a build's counter above 0 changes no column an index of
// derivation_builds names, so PostgreSQL updates the row in place without new index entries; only
// the move that takes it to 0 (the `ready` flag of the ready index) writes index entries. Counted
// with PostgreSQL's own statistics of the completion's transaction (pg_stat_xact_user_tables).
import { randomUUID } from 'node:crypto';
import t from 'tap';
import { PROTOCOL_VERSION, type MessageOf } from '../../../protocol/index.js';
import { applyStatusChanges, changeBuildStatuses, type StatusChange } from '../../../services/builds/buildStatus.js';
import { recordEvalBatch } from '../../../services/builds/graphRecorder.js';
import { readyBuilds } from '../../../services/builds/schedulerQueries.js';
import { testDatabase } from '../../support/db.js';
import { derivationNode } from '../../support/derivationNodes.js';
import { testEvents } from '../../support/testEvents.js';
import { recordingFixture } from '../../support/recordingFixture.js';

t.test('readiness moves above 0 are HOT; the move to 0 flips `ready` and the ready read finds the build', async (t) => {
  const fixture = await recordingFixture(t);
  const { db, events } = fixture;
  const evaluation = await fixture.evaluation('building');
  const [a, b, c] = [derivationNode('hot-a'), derivationNode('hot-b'), derivationNode('hot-c')];
  const top = derivationNode('hot-top', [a.drvPath, b.drvPath, c.drvPath]);
  const batch: MessageOf<'evalBatch'> = { v: PROTOCOL_VERSION, t: 'evalBatch', jobId: `eval:${evaluation}:1`, derivations: [a, b, c, top].map((n) => n.derivation), attributes: [], errors: [] };
  await recordEvalBatch(events, evaluation, batch);
  const rows = await db.sql<{ drv_path: string; id: string }[]>`select d.drv_path, db.id from derivation_builds db join derivations d on d.id = db.derivation_id`;
  const id = new Map(rows.map((r) => [r.drv_path, r.id]));
  const [ia, ib, ic, itop] = [a, b, c, top].map((n) => id.get(n.drvPath)!);
  const counter = async () => (await db.sql<{ inputs_remaining: number; ready: boolean }[]>`select inputs_remaining, ready from derivation_builds where id = ${itop!}`)[0];
  t.same(await counter(), { inputs_remaining: 3, ready: false }, 'recorded with its three open inputs');

  /**
   * The changes in one transaction, with derivation_builds' updates and HOT updates counted in it
   * (the statistics not yet flushed of the transaction's backend: read before and after, as
   * PostgreSQL 15 keeps earlier transactions' counts there until its next flush).
   */
  const counted = (ids: string[], change: StatusChange) => events.transaction(async (tx, emit) => {
    const stats = async () => (await tx<{ upd: number; hot: number }[]>`
      select coalesce(sum(n_tup_upd), 0)::int as upd, coalesce(sum(n_tup_hot_upd), 0)::int as hot from pg_stat_xact_user_tables where relname = 'derivation_builds'`)[0]!;
    const before = await stats();
    t.same(await applyStatusChanges(tx, emit, ids, change), ids);
    const after = await stats();
    return { upd: after.upd - before.upd, hot: after.hot - before.hot };
  });
  await changeBuildStatuses(events, [ia!, ib!, ic!].map((i) => ({ id: i, change: { event: { type: 'dispatch' }, workerId: randomUUID() } })));

  // a and b complete together (a status update each, non-HOT: `status` is an index key), then top's move 3 → 1
  t.same(await counted([ia!, ib!], { event: { type: 'succeed' } }), { upd: 3, hot: 1 }, 'the move 3 → 1 is HOT');
  t.same(await counter(), { inputs_remaining: 1, ready: false });
  // c completes: top's move 1 → 0 changes `ready`, which the ready index names
  t.same(await counted([ic!], { event: { type: 'succeed' } }), { upd: 2, hot: 0 }, 'the move to 0 writes index entries');
  t.same(await counter(), { inputs_remaining: 0, ready: true });
  t.same((await readyBuilds(db.sql, 10, new Date())).map((r) => r.id), [itop], 'the ready read finds it by the flag');
  // c goes back to the queue: top waits again (1, not ready), and the ready read leaves it out
  await changeBuildStatuses(events, [{ id: ic!, change: { event: { type: 'requeue', why: 'evicted' } } }]);
  t.same(await counter(), { inputs_remaining: 1, ready: false });
  t.same((await readyBuilds(db.sql, 10, new Date())).map((r) => r.id), [ic], 'only c is ready again');
});

t.test('the check holds `ready` to the counter: a write that sets one without the other is refused', async (t) => {
  const db = await testDatabase(t);
  const [drv] = await db.sql<{ id: string }[]>`
    insert into derivations (drv_path, name, system, outputs) values ('/nix/store/00000000000000000000000000000000-x.drv', 'x', 'x86_64-linux', '{}') returning id`;
  await t.rejects(db.sql`insert into derivation_builds (derivation_id, inputs_remaining) values (${drv!.id}, 2)`, { code: '23514' }, 'open inputs, `ready` left at its default');
  await db.sql`insert into derivation_builds (derivation_id, inputs_remaining, ready) values (${drv!.id}, 2, false)`;
  await t.rejects(db.sql`update derivation_builds set inputs_remaining = 0 where derivation_id = ${drv!.id}`, { code: '23514' });
});
