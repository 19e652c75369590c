import t, { type Test } from 'tap';
import { buildProgressReporter } from '../../../services/index.js';
import { changeBuildStatus } from '../../../services/builds/buildStatus.js';
import { testDatabase } from '../../support/db.js';
import { insertProject } from '../../support/modelRows.js';
import { outboxReader } from '../../support/outboxEvents.js';
import { testEvents } from '../../support/testEvents.js';

// build.<status> (durable for entry points), build.status_changed (every transition, live-only) and
// build.progress, for each evaluation's build that shares a derivation_build.

async function setup(t: Test) {
  const db = await testDatabase(t);
  const { sql } = db;
  const { events, published } = await testEvents(t, db);
  const projectId = await insertProject(sql, 'acme', 'web');
  const [task] = await sql<{ id: string }[]>`insert into tasks (project_id, name) values (${projectId}, 'default') returning id`;
  const evaluation = async () =>
    (await sql<{ id: string }[]>`insert into evaluations (task_id, repository, wildcard, phase) values (${task!.id}, 'file:///x', '*', 'building') returning id`)[0]!.id;
  const [drv] = await sql<{ id: string }[]>`
    insert into derivations (drv_path, name, system, outputs) values ('/nix/store/00000000000000000000000000000000-a.drv', 'a', 'x86_64-linux', '{}') returning id`;
  const [shared] = await sql<{ id: string }[]>`insert into derivation_builds (derivation_id) values (${drv!.id}) returning id`;
  const build = async (evaluationId: string, entryPoint: boolean) =>
    (await sql<{ id: string }[]>`
      insert into builds (evaluation_id, derivation_build_id, entry_point, attr) values (${evaluationId}, ${shared!.id}, ${entryPoint}, ${entryPoint ? 'packages.x86_64-linux.a' : null}) returning id`)[0]!.id;
  return { sql, events, published, taskId: task!.id, projectId, derivationBuild: shared!.id, evaluation, build };
}

t.test('a status change: build.<status> durable for entry points, build.status_changed for every build', async (t) => {
  const { sql, events, published, derivationBuild, evaluation, build, taskId } = await setup(t);
  const e1 = await evaluation();
  const e2 = await evaluation();
  const root = await build(e1, true);
  const dependency = await build(e2, false);
  const next = outboxReader(sql);

  t.equal(await changeBuildStatus(events, derivationBuild, { event: { type: 'dispatch' } }), 1);
  const live = published.filter((e) => e.event === 'build.status_changed');
  t.equal(live.length, 2, 'one per evaluation\'s build');
  for (const [buildId, evaluationId, entry] of [[root, e1, true], [dependency, e2, false]] as const) {
    const e = live.find((l) => l.scope.buildId === buildId)!;
    t.match(JSON.parse(e.frame), {
      event: 'build.status_changed',
      content: { build_id: buildId, derivation_build: derivationBuild, evaluation_id: evaluationId, status: 'started', previous: 'queued', task: 'default', project: 'acme/web', entry_point: entry },
    });
    t.match(e.scope, { evaluationId, taskId, buildId }, 'scoped for the evaluation, task and build live topics');
  }
  t.equal(published.filter((e) => e.event === 'build.started').length, 2, 'build.started for both on the bus');
  t.match(await next(), [{ event: 'build.started', content: { build_id: root, entry_point: true, attr: 'packages.x86_64-linux.a' } }], 'only the entry point\'s is durable');

  const before = published.length;
  t.equal(await changeBuildStatus(events, derivationBuild, { event: { type: 'substitute' } }), null, 'not in a status the event leaves: no change');
  t.equal(published.length, before, 'and no event');
  t.same(await next(), []);

  await changeBuildStatus(events, derivationBuild, { event: { type: 'fail', class: 'FailedPermanent', reason: 'builder_failed' }, failure: { class: 'FailedPermanent', reason: 'exit', message: 'exit 1' } });
  t.match(JSON.parse(published.filter((e) => e.event === 'build.status_changed').at(-1)!.frame), { content: { status: 'failed', previous: 'started', failure: 'FailedPermanent' } });
});

t.test('build.progress reaches every build of the derivation_build, looked up once per few seconds', async (t) => {
  const { sql, events, published, derivationBuild, evaluation, build } = await setup(t);
  const e1 = await evaluation();
  const first = await build(e1, true);
  let now = Date.parse('2030-01-01T00:00:00Z');
  const errors: unknown[] = [];
  const reporter = buildProgressReporter(sql, events, { now: () => new Date(now) }, (e) => errors.push(e));
  const progress = { derivationBuildId: derivationBuild, status: 'started' as const, phase: 'uploading' as const, bytes: 512, totalBytes: 1024, paths: 1, totalPaths: 2 };

  await reporter.report(progress);
  const sent = published.filter((e) => e.event === 'build.progress');
  t.equal(sent.length, 1);
  t.match(sent[0]!.scope, { buildId: first, evaluationId: e1 }, 'the build topic of /builds/{build}/live');
  t.match(JSON.parse(sent[0]!.frame), {
    content: { build_id: first, derivation_build: derivationBuild, evaluation_id: e1, status: 'started', task: 'default', project: 'acme/web', phase: 'uploading', bytes: 512, total_bytes: 1024, paths: 1, total_paths: 2 },
  });

  const e2 = await evaluation();
  const second = await build(e2, false);
  await reporter.report(progress);
  t.equal(published.filter((e) => e.event === 'build.progress').length, 2, 'the remembered builds: the new one not yet');
  now += 5_000;
  await reporter.report(progress);
  const latest = published.filter((e) => e.event === 'build.progress').slice(2);
  t.same(latest.map((e) => e.scope.buildId).sort(), [first, second].sort(), 'looked up again after a few seconds');
  reporter.forget(derivationBuild);
  await reporter.report({ ...progress, derivationBuildId: '7f1c2a9e-3b4d-4c5e-8f60-718293a4b5c6' });
  t.equal(published.filter((e) => e.event === 'build.progress').length, 4, 'an unknown derivation_build: nothing');
  await reporter.report({ ...progress, bytes: -1 });
  t.equal(errors.length, 1, 'a bad report is passed to onError, never thrown');
  t.same(await outboxReader(sql)(), [], 'progress is never durable');
});
