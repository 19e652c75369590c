// The dispatch path's statements are not planned again per execution (docs/builds.md, "Plans of
// the status batches"): a status batch's transaction runs its prepared statements on their generic
// plans, and the restore pass's candidate read has no parameters. Counted with PostgreSQL's own
// per-session figures (pg_prepared_statements: custom_plans, generic_plans), on real batches.
import { randomUUID } from 'node:crypto';
import t from 'tap';
import type { TransactionSql } from 'postgres';
import { PROTOCOL_VERSION, type MessageOf } from '../../../protocol/index.js';
import { changeBuildStatuses } from '../../../services/builds/buildStatus.js';
import { recordEvalBatch } from '../../../services/builds/graphRecorder.js';
import { requeuedForOthers } from '../../../services/builds/tenantScope.js';
import { testDatabase } from '../../support/db.js';
import { derivationNode } from '../../support/derivationNodes.js';
import { testEvents } from '../../support/testEvents.js';
import { recordingFixture } from '../../support/recordingFixture.js';

interface Plans { statement: string; custom: number; generic: number }

/** This session's prepared statements whose text holds `marker`: how often each was planned for its values, and run on its generic plan. */
const plansOf = (tx: TransactionSql, marker: string) => tx<Plans[]>`
  select statement, custom_plans::int as custom, generic_plans::int as generic from pg_prepared_statements where statement like ${`%${marker}%`}`;

t.test('status batches and the readiness moves run on generic plans, never planned per batch', async (t) => {
  const fixture = await recordingFixture(t);
  const { db, events } = fixture;
  const evaluation = await fixture.evaluation('building');
  // eight layers of two, each build using both of the layer below: every batch moves counters
  const layers: ReturnType<typeof derivationNode>[][] = [];
  for (let i = 0; i < 8; i++) layers.push([0, 1].map((j) => derivationNode(`plans-${i}-${j}`, (layers[i - 1] ?? []).map((n) => n.drvPath))));
  const batch: MessageOf<'evalBatch'> = { v: PROTOCOL_VERSION, t: 'evalBatch', jobId: `eval:${evaluation}:1`, derivations: layers.flat().map((n) => n.derivation), attributes: [], errors: [] };
  await recordEvalBatch(events, evaluation, batch);
  const rows = await db.sql<{ drv_path: string; id: string }[]>`select d.drv_path, db.id from derivation_builds db join derivations d on d.id = db.derivation_id`;
  const id = new Map(rows.map((r) => [r.drv_path, r.id]));

  const seen: Plans[] = [];
  for (const layer of layers) {
    const ids = layer.map((n) => id.get(n.drvPath)!);
    await changeBuildStatuses(events, ids.map((i) => ({ id: i, change: { event: { type: 'dispatch' }, workerId: randomUUID() } })));
    await changeBuildStatuses(events, ids.map((i) => ({ id: i, change: { event: { type: 'succeed' } } })), async (tx) => {
      seen.push(...await plansOf(tx, 'with locked as materialized'), ...await plansOf(tx, 'set inputs_remaining = dep.inputs_remaining'));
    });
  }
  const batches = seen.filter((p) => p.statement.includes('with locked as materialized'));
  const moves = seen.filter((p) => p.statement.includes('set inputs_remaining'));
  t.ok(batches.some((p) => p.generic >= 5), 'a connection ran the status batch on its generic plan, again and again');
  t.ok(moves.some((p) => p.generic >= 1), 'and the readiness move');
  t.same([...batches, ...moves].filter((p) => p.custom > 0), [], 'no execution was planned for its values');
  t.equal((await db.sql`select count(*)::int as n from derivation_builds where status = 'completed'`)[0]!['n'], 16, 'every batch applied');
});

t.test('the restore pass\'s candidates: no parameters, planned once per connection', async (t) => {
  const db = await testDatabase(t);
  const reserved = await db.sql.reserve();
  t.teardown(() => reserved.release());
  for (let i = 0; i < 7; i++) t.same(await requeuedForOthers(reserved, 500), []);
  const plans = await plansOf(reserved as unknown as TransactionSql, 'done_for is not null or db.failed_for is not null');
  t.equal(plans.length, 1);
  t.match(plans[0], { custom: 0, generic: 7 }, 'seven reads on one generic plan');
});
