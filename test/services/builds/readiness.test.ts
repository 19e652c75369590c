// The readiness counter (migration 0042, docs/builds.md "The scheduler's data structures"): a
// recorded build counts its open inputs; every status change into or out of {completed,
// substituted} moves its dependents' counters in the same transaction and names the builds it made
// ready; the scheduler's ready query reads the counter. Concurrent batches sharing dependents
// neither deadlock nor lose a decrement; two batches starting the same builds start each once. The ready queue answers from memory between reads of the
// database, learns what this process's changes made ready by id, and reads afresh when told.
import { randomUUID } from 'node:crypto';
import t from 'tap';
import { PROTOCOL_VERSION, type MessageOf } from '../../../protocol/index.js';
import { changeBuildStatuses, type StatusChange } from '../../../services/builds/buildStatus.js';
import { recordEvalBatch } from '../../../services/builds/graphRecorder.js';
import { ReadyQueue } from '../../../services/builds/readyQueue.js';
import { readyBuilds, type ReadiedBuild } from '../../../services/builds/schedulerQueries.js';
import { systemClock } from '../../../supervisors/index.js';
import { derivationNode, type DerivationNodeFixture } from '../../support/derivationNodes.js';
import { testEvents } from '../../support/testEvents.js';
import { recordingFixture } from '../../support/recordingFixture.js';

t.test('the readiness counter', async (t) => {
  const fixture = await recordingFixture(t);
  const { db, events } = fixture;
  const evaluation = await fixture.evaluation('building');

  const record = (nodes: DerivationNodeFixture[]) => {
    const batch: MessageOf<'evalBatch'> = { v: PROTOCOL_VERSION, t: 'evalBatch', jobId: `eval:${evaluation}:1`, derivations: nodes.map((n) => n.derivation), attributes: [], errors: [] };
    return recordEvalBatch(events, evaluation, batch);
  };
  const buildIds = async (nodes: DerivationNodeFixture[]) => {
    const rows = await db.sql<{ drv_path: string; id: string }[]>`
      select d.drv_path, db.id from derivation_builds db join derivations d on d.id = db.derivation_id where d.drv_path = any(${nodes.map((n) => n.drvPath)})`;
    const byPath = new Map(rows.map((r) => [r.drv_path, r.id]));
    return nodes.map((n) => byPath.get(n.drvPath)!);
  };
  const remaining = async (nodes: DerivationNodeFixture[]) => {
    const rows = await db.sql<{ drv_path: string; inputs_remaining: number }[]>`
      select d.drv_path, db.inputs_remaining from derivation_builds db join derivations d on d.id = db.derivation_id where d.drv_path = any(${nodes.map((n) => n.drvPath)})`;
    const byPath = new Map(rows.map((r) => [r.drv_path, r.inputs_remaining]));
    return nodes.map((n) => byPath.get(n.drvPath));
  };
  const ready = async () => (await readyBuilds(db.sql, 1000, new Date())).map((r) => r.drv_path).sort();
  const change = (ids: string[], c: StatusChange) => changeBuildStatuses(events, ids.map((id) => ({ id, change: c })));

  t.test('a build counts its open inputs and becomes ready when the last one is built or substituted', async (t) => {
    const a = derivationNode('a');
    const b = derivationNode('b');
    const c = derivationNode('c', [a.drvPath, b.drvPath]);
    const d = derivationNode('d', [c.drvPath]);
    // c and d in the batch that also holds their inputs: an input whose build the same statement inserts counts as open
    await record([a]);
    await record([b, c, d]);
    t.same(await remaining([a, b, c, d]), [0, 0, 2, 1]);
    t.same(await ready(), [a.drvPath, b.drvPath].sort());

    const [ia, ib, ic] = await buildIds([a, b, c]);
    const readied: string[][] = [];
    const told = { readied: (rows: ReadiedBuild[]) => readied.push(rows.map((r) => r.id)) };
    await change([ia!, ib!], { event: { type: 'dispatch' }, workerId: randomUUID() });
    t.same(await remaining([c]), [2], 'starting changes nothing');
    await change([ia!], { event: { type: 'succeed' }, ...told });
    t.same(await remaining([c, d]), [1, 1]);
    t.same(readied, [], 'c still waits for b');
    await change([ib!], { event: { type: 'succeed' }, ...told });
    t.same(await remaining([c, d]), [0, 1]);
    t.same(readied, [[ic]], 'the change names the build it made ready');
    t.same(await ready(), [c.drvPath]);

    await change([ic!], { event: { type: 'substitute' }, ...told });
    t.same(await remaining([d]), [0]);
    t.same(await ready(), [d.drvPath]);
    // A cache claimed c's outputs but a worker could not fetch them: c goes back to the queue, d waits again.
    await change([ic!], { event: { type: 'requeue', why: 'substitute_miss' } });
    t.same(await remaining([d]), [1]);
    t.same(await ready(), [c.drvPath]);
  });

  t.test('the builds a change made ready are named only once it committed, and the scheduler\'s ready read then finds them', async (t) => {
    const input = derivationNode('committed-input');
    const user = derivationNode('committed-user', [input.drvPath]);
    await record([input, user]);
    const [inputId, userId] = await buildIds([input, user]);
    // The same events, noting while a transaction's function runs or its commit is still to come.
    let uncommitted = false;
    const watched = new Proxy(events, {
      get(target, key, receiver) {
        if (key !== 'transaction') return Reflect.get(target, key, receiver) as unknown;
        return async (...args: Parameters<typeof events.transaction>) => {
          uncommitted = true;
          try {
            return await target.transaction(...args);
          } finally {
            uncommitted = false;
          }
        };
      },
    });
    await changeBuildStatuses(watched, [{ id: inputId!, change: { event: { type: 'dispatch' }, workerId: randomUUID() } }]);
    const told: { ids: string[]; uncommitted: boolean; found: Promise<string[]> }[] = [];
    const readied = (builds: ReadiedBuild[]) => {
      const ids = builds.map((b) => b.id);
      told.push({ ids, uncommitted, found: readyBuilds(db.sql, 10, new Date(), ids).then((rows) => rows.map((r) => r.id)) });
    };
    await changeBuildStatuses(watched, [{ id: inputId!, change: { event: { type: 'succeed' }, readied } }]);
    t.equal(told.length, 1);
    t.same(told[0]!.ids, [userId]);
    t.equal(told[0]!.uncommitted, false, 'told after the commit, not from inside the transaction');
    t.same(await told[0]!.found, [userId], 'a ready read made when told finds the build');
  });

  t.test('a build recorded after its inputs were built counts only the open ones', async (t) => {
    const built = derivationNode('built');
    const open = derivationNode('open');
    await record([built, open]);
    const [id] = await buildIds([built]);
    await change([id!], { event: { type: 'dispatch' }, workerId: randomUUID() });
    await change([id!], { event: { type: 'succeed' } });
    const top = derivationNode('top', [built.drvPath, open.drvPath]);
    await record([top]);
    t.same(await remaining([top]), [1]);
  });

  t.test('the ready queue: memory between reads, ids from its own changes, the database when invalidated', async (t) => {
    await db.sql`update evaluations set phase = 'completed' where id = ${evaluation}`;
    const evaluation2 = await fixture.evaluation('building');
    const recordIn = (nodes: DerivationNodeFixture[]) => recordEvalBatch(events, evaluation2, {
      v: PROTOCOL_VERSION, t: 'evalBatch', jobId: `eval:${evaluation2}:1`, derivations: nodes.map((n) => n.derivation), attributes: [], errors: [],
    });
    const leaf = derivationNode('q-leaf');
    const top = derivationNode('q-top', [leaf.drvPath]);
    await recordIn([leaf, top]);
    const queue = new ReadyQueue(db.sql, systemClock, 100);
    const paths = async () => (await queue.take()).map((r) => r.drv_path).sort();
    t.same(await paths(), [leaf.drvPath], 'the first take reads the database');
    // Another process's work: the queue does not see it until it reads again.
    const other = derivationNode('q-other');
    await recordIn([other]);
    t.same(await paths(), [leaf.drvPath], 'between reads it answers from memory');
    const [leafId, topId] = await buildIds([leaf, top]);
    await change([leafId!], { event: { type: 'dispatch' }, workerId: randomUUID() });
    queue.remove(leafId!);
    await change([leafId!], { event: { type: 'succeed' }, readied: (rows) => queue.add(rows) });
    t.same(await paths(), [top.drvPath], 'a build its own completion made ready is added as the change returned it');
    t.equal((await queue.take())[0]!.id, topId);
    queue.invalidate();
    t.same(await paths(), [other.drvPath, top.drvPath].sort(), 'invalidated, it reads the database again');
  });

  t.test('the ready queue pages past a full window no worker takes, and comes back to the front at the end', async (t) => {
    await db.sql`update evaluations set phase = 'completed' where phase = 'building'`;
    const evaluation3 = await fixture.evaluation('building');
    const nodes = Array.from({ length: 5 }, (_, i) => derivationNode(`page-${i}`));
    // one statement: the five share queued_at to the microsecond, so the id orders them
    await recordEvalBatch(events, evaluation3, {
      v: PROTOCOL_VERSION, t: 'evalBatch', jobId: `eval:${evaluation3}:1`, derivations: nodes.map((n) => n.derivation), attributes: [], errors: [],
    });
    const ids = (await buildIds(nodes)).map((id) => id!).sort();
    const queue = new ReadyQueue(db.sql, systemClock, 2);
    const window = async () => (await queue.take()).map((r) => r.id);
    t.same(await window(), ids.slice(0, 2), 'the oldest two');
    queue.pagePast();
    t.same(await window(), ids.slice(2, 4), 'nothing placed from a full window: the next two');
    queue.invalidate();
    t.same(await window(), ids.slice(0, 2), 'a page is read once: the next read is at the front again, nothing before the page is left behind');
    queue.pagePast();
    t.same(await window(), ids.slice(2, 4), 'paged past again');
    queue.pagePast();
    t.same(await window(), ids.slice(4), 'the end of the queue');
    queue.pagePast();
    t.same(await window(), ids.slice(4), 'a window that is not full is not paged past');
    queue.invalidate();
    t.same(await window(), ids.slice(0, 2), 'read again after the end: the front');
    // the build the cursor names is removed (orphan GC deletes its derivation) before the page is read
    queue.pagePast();
    await db.sql`delete from derivations where id = (select derivation_id from derivation_builds where id = ${ids[1]!})`;
    t.same(await window(), [ids[0], ids[2]], 'a vanished cursor: the front, in the same read');
    // nothing after the cursor is ready any more (back off for retries)
    queue.pagePast();
    await db.sql`update derivation_builds set not_before = now() + interval '1 hour' where id = any(${[ids[3]!, ids[4]!]}::uuid[])`;
    t.same(await window(), [ids[0], ids[2]], 'an empty page: the front, in the same read');
    await db.sql`update evaluations set phase = 'completed' where id = ${evaluation3}`;
  });

  t.test('two batches racing to start the same builds (two server processes): each build starts once', async (t) => {
    const nodes = Array.from({ length: 16 }, (_, i) => derivationNode(`race-${i}`));
    await record(nodes);
    const ids = await buildIds(nodes);
    const [first, second] = await Promise.all([
      change(ids, { event: { type: 'dispatch' }, workerId: randomUUID() }),
      change([...ids].reverse(), { event: { type: 'dispatch' }, workerId: randomUUID() }),
    ]);
    const winners = ids.map((_, i) => [first![i], second![ids.length - 1 - i]].filter((a) => a !== null).length);
    t.same(winners, ids.map(() => 1), 'exactly one batch started each build');
    const rows = await db.sql<{ attempts: number }[]>`select attempts from derivation_builds where id = any(${ids}::uuid[])`;
    t.same(rows.map((r) => r.attempts), ids.map(() => 1), 'one attempt each');
  });

  t.test('concurrent batches sharing dependents neither deadlock nor lose a decrement', async (t) => {
    const leaves = Array.from({ length: 24 }, (_, i) => derivationNode(`leaf-${i}`));
    const tops = Array.from({ length: 12 }, (_, i) => derivationNode(`top-${i}`, leaves.map((l) => l.drvPath)));
    await record([...leaves, ...tops]);
    t.same(await remaining(tops), tops.map(() => leaves.length));
    const ids = await buildIds(leaves);
    await change(ids, { event: { type: 'dispatch' }, workerId: randomUUID() });
    // Four batches at once, each completing its leaves in another order.
    const quarters = [0, 1, 2, 3].map((q) => ids.filter((_, i) => i % 4 === q));
    await Promise.all(quarters.map((quarter, q) => change(q % 2 === 0 ? quarter : [...quarter].reverse(), { event: { type: 'succeed' } })));
    t.same(await remaining(tops), tops.map(() => 0));
  });
});
