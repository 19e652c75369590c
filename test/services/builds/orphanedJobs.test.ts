// The orphan sweep puts the jobs of a dead server process back in the queue through the
// lifecycle modules, so live sockets see build.status_changed and evaluation.queued.
import t from 'tap';
import { requeueOrphanedJobs } from '../../../services/builds/schedulerQueries.js';
import { testDatabase } from '../../support/db.js';
import { insertProject } from '../../support/modelRows.js';
import { testEvents } from '../../support/testEvents.js';

t.test('a job without a live worker connection is re-queued with its event', async (t) => {
  const db = await testDatabase(t);
  const { sql } = db;
  const { events, published } = await testEvents(t, db);
  const projectId = await insertProject(sql, 'acme', 'web');
  const [task] = await sql<{ id: string }[]>`insert into tasks (project_id, name) values (${projectId}, 'default') returning id`;
  const evaluation = async (phase: string) => (await sql<{ id: string }[]>`
    insert into evaluations (task_id, repository, wildcard, phase) values (${task!.id}, 'file:///x', '*', ${phase}) returning id`)[0]!.id;
  const building = await evaluation('building');
  const evaluating = await evaluation('evaluating');
  const [drv] = await sql<{ id: string }[]>`
    insert into derivations (drv_path, name, system, outputs) values ('/nix/store/00000000000000000000000000000000-a.drv', 'a', 'x86_64-linux', '{}') returning id`;
  const [shared] = await sql<{ id: string }[]>`insert into derivation_builds (derivation_id, status, attempts) values (${drv!.id}, 'started', 1) returning id`;
  await sql`insert into builds (evaluation_id, derivation_build_id) values (${building}, ${shared!.id})`;

  t.equal(await requeueOrphanedJobs(events), 2, 'the build and the evaluation');
  t.same(await sql`select status from derivation_builds where id = ${shared!.id}`, [{ status: 'queued' }]);
  t.same(await sql`select phase from evaluations where id = ${evaluating}`, [{ phase: 'queued' }]);
  const changed = published.filter((e) => e.event === 'build.status_changed');
  t.equal(changed.length, 1, 'one per evaluation\'s build');
  t.match(JSON.parse(changed[0]!.frame), { content: { derivation_build: shared!.id, evaluation_id: building, status: 'queued', previous: 'started' } });
  t.match(published.filter((e) => e.event === 'evaluation.queued').map((e) => e.scope), [{ evaluationId: evaluating }]);

  const before = published.length;
  t.equal(await requeueOrphanedJobs(events), 0, 'nothing left to re-queue');
  t.equal(published.length, before, 'and no event');
});
