// Each organization sees its own outcome of a shared build (docs/builds.md, "Whose failure";
// migration 0079, services/builds/organizationStatus.ts): acme's server fails a build, beta's
// server then completes it for beta. The record reads completed; acme still reads it failed, with
// its own failure, in every read of its evaluation (views, counts, progress, graph, log stream,
// events, the Git host report); beta reads completed; kiln's own worker's completion stands for
// everyone. The mirror case ("beta's own failure after acme's completion") is tenantScope.test.
import { randomUUID } from 'node:crypto';
import t from 'tap';
import { PROTOCOL_VERSION, type MessageOf } from '../../../protocol/index.js';
import { anonymous, type Principal } from '../../../services/access/principal.js';
import { changeBuildStatuses } from '../../../services/builds/buildStatus.js';
import { BuildOutcomes } from '../../../services/builds/buildOutcomes.js';
import { buildProgressReporter } from '../../../services/builds/buildProgress.js';
import { buildGraphsService } from '../../../services/builds/buildGraphs.js';
import { buildLogStreams } from '../../../services/builds/buildLogStreams.js';
import { BuildLogFeed } from '../../../services/builds/buildLogFeed.js';
import { buildViewsService } from '../../../services/builds/buildViews.js';
import { EvaluationProgress } from '../../../services/builds/evaluationProgress.js';
import { evaluationsService } from '../../../services/builds/evaluations.js';
import { changePhase } from '../../../services/builds/evaluationPhases.js';
import { recordEvalBatch } from '../../../services/builds/graphRecorder.js';
import { evaluationSnapshot } from '../../../services/gitHosts/evaluationSnapshot.js';
import { reportContent } from '../../../services/gitHosts/reportContent.js';
import { projectSeriesService } from '../../../services/metrics/projectSeries.js';
import { systemClock } from '../../../supervisors/index.js';
import { testDatabase } from '../../support/db.js';
import { derivationNode, type DerivationNodeFixture } from '../../support/derivationNodes.js';
import { insertProject } from '../../support/modelRows.js';
import { testEvents } from '../../support/testEvents.js';

t.test('another organization\'s completion does not turn a build that failed for acme into acme\'s success', async (t) => {
  const db = await testDatabase(t);
  const { events, published } = await testEvents(t, db);
  const acmeProject = await insertProject(db.sql, 'acme', 'app');
  const betaProject = await insertProject(db.sql, 'beta', 'app');
  const orgOf = async (project: string) => (await db.sql<{ organization_id: string }[]>`select organization_id from projects where id = ${project}`)[0]!.organization_id;
  const acme = await orgOf(acmeProject);
  const beta = await orgOf(betaProject);
  const serverOf = async (org: string, project: string) => ({
    id: (await db.sql<{ id: string }[]>`insert into servers (organization_id, name, host) values (${org}, 'box', 'box.test') returning id`)[0]!.id,
    projects: [project],
  });
  const acmeServer = await serverOf(acme, acmeProject);
  const betaServer = await serverOf(beta, betaProject);
  const kilnWorker = { id: randomUUID(), projects: null };
  type Worker = { id: string; projects: string[] | null };

  const building = async (project: string, nodes: DerivationNodeFixture[]) => {
    const [task] = await db.sql<{ id: string }[]>`
      insert into tasks (project_id, name) values (${project}, 'default')
      on conflict (project_id, name) do update set name = excluded.name returning id`;
    const id = randomUUID();
    await db.sql`insert into evaluations (id, task_id, repository, wildcard, phase) values (${id}, ${task!.id}, 'file:///nonexistent', '*', 'evaluating')`;
    const batch: MessageOf<'evalBatch'> = { v: PROTOCOL_VERSION, t: 'evalBatch', jobId: `eval:${id}:1`, derivations: nodes.map((n) => n.derivation), attributes: [], errors: [] };
    await recordEvalBatch(events, id, batch);
    await changePhase(events, id, { event: { type: 'succeed' } });
    return id;
  };
  const idOf = async (node: DerivationNodeFixture) =>
    (await db.sql<{ id: string }[]>`select db.id from derivation_builds db join derivations d on d.id = db.derivation_id where d.drv_path = ${node.drvPath}`)[0]!.id;
  const row = async (node: DerivationNodeFixture) =>
    (await db.sql<{ status: string; done_for: string[] | null; failed_for: string[] | null; failure_reason: string | null }[]>`
      select db.status, db.done_for, db.failed_for, db.failure_reason from derivation_builds db where db.id = ${await idOf(node)}`)[0]!;
  const buildIdOf = async (evaluationId: string, node: DerivationNodeFixture) =>
    (await db.sql<{ id: string }[]>`select id from builds where evaluation_id = ${evaluationId} and derivation_build_id = ${await idOf(node)}`)[0]!.id;

  const onError = (e: unknown) => t.fail(String(e));
  const progress = new EvaluationProgress(db.sql, events, onError);
  t.teardown(() => progress.stop());
  const outcomes = new BuildOutcomes(db.sql, events, progress, buildProgressReporter(db.sql, events, systemClock, onError),
    () => undefined, { maxAttempts: 1, retryBackoffSecs: 1, inputsUnavailableMaxLoops: 1, clock: systemClock });
  const dispatch = async (node: DerivationNodeFixture, worker: Worker) => {
    const id = await idOf(node);
    await changeBuildStatuses(events, [{ id, change: { event: { type: 'dispatch' }, workerId: worker.id, workerProjects: worker.projects } }]);
    return id;
  };
  const failOn = async (node: DerivationNodeFixture, worker: Worker) =>
    outcomes.failed(await dispatch(node, worker), 1, { class: 'FailedPermanent', reason: 'builder_failed', message: 'builder failed' }, { logBytes: 0, logDroppedBytes: 0 });
  const completeOn = async (node: DerivationNodeFixture, worker: Worker) => {
    await outcomes.completeSoon(await dispatch(node, worker), { logBytes: 0, logDroppedBytes: 0 });
    await outcomes.settle();
  };

  // The reads under test, on the real services; access is not what this file tests.
  const evaluationsRead = evaluationsService({
    sql: db.sql, events, scheduler: { wake: () => undefined, cancelEvaluation: async () => undefined },
    repositories: { allowLocal: false } as never,
  });
  const visible = { visible: async (_who: Principal, id: string) => evaluationsRead.visible(member, id, 'viewProject') };
  const [user] = await db.sql<{ id: string }[]>`insert into users (username, email) values ('root', 'root@test') returning id`;
  await db.sql`insert into organization_members (organization_id, user_id, role) values (${acme}, ${user!.id}, 'View'), (${beta}, ${user!.id}, 'View')`;
  const member: Principal = { kind: 'user', via: 'session', sessionId: randomUUID(), userId: user!.id, username: 'root', superuser: false };
  const views = buildViewsService(db.sql, visible);
  const graphs = buildGraphsService(db.sql, views);
  const metrics = projectSeriesService({ sql: db.sql, clock: systemClock });
  const feed = new BuildLogFeed(3_600_000);
  t.teardown(() => feed.close());
  const streams = buildLogStreams({ sql: db.sql, feed, evaluations: visible, views });

  /** What the evaluation's reads say of the build of `node`. */
  const seen = async (evaluationId: string, node: DerivationNodeFixture) => {
    const drv = node.drvPath;
    const build = (await views.evaluationBuilds(anonymous, evaluationId)).find((b) => b.drv_path === drv)!;
    const page = await views.evaluationBuildsPage(anonymous, evaluationId, { page: 1, per_page: 50, status: 'failed' });
    const lines: { type: string; drv_path: string; status?: string }[] = [];
    for await (const chunk of await streams.evaluation(anonymous, evaluationId)) {
      lines.push(...Buffer.from(chunk).toString('utf8').trim().split('\n').map((l) => JSON.parse(l) as { type: string; drv_path: string; status?: string }));
    }
    const snapshot = (await evaluationSnapshot(db.sql, evaluationId))!;
    return {
      view: { status: build.status, failure: build.failure },
      single: (await views.build(anonymous, build.build_id)).status,
      failedInPage: page.builds.some((b) => b.drv_path === drv),
      failedCount: page.counts.failed,
      evaluationCounts: (await evaluationsRead.get(member, evaluationId)).builds.failed,
      logEnd: lines.find((l) => l.type === 'end' && l.drv_path === drv)?.status,
      report: { conclusion: reportContent(snapshot, 'https://kiln.test').conclusion, failed: snapshot.failedBuilds.map((f) => `${f.name}:${f.reason}`).sort() },
    };
  };
  const content = (e: { frame: string }) => (JSON.parse(e.frame) as { content: Record<string, unknown> }).content;
  const lastProgress = (evaluationId: string) =>
    published.filter((e) => e.event === 'evaluation.progress' && content(e).evaluation_id === evaluationId).map(content).at(-1);
  const buildEvents = (since: number, evaluationId: string) =>
    published.slice(since).filter((e) => /^build\.(completed|failed)$/.test(e.event) && content(e).evaluation_id === evaluationId)
      .map((e) => ({ type: e.event, failure: content(e).failure }));
  const waitFor = async (check: () => boolean) => {
    while (!check()) await new Promise((resolve) => setImmediate(resolve));
  };

  t.test('acme\'s server fails it, beta\'s server completes it: acme reads failed with its own failure, beta completed', async (t) => {
    const dep = derivationNode('dep');
    const acmeTop = derivationNode('acme-top', [dep.drvPath]);
    const acmeEval = await building(acmeProject, [dep, acmeTop]);
    const betaEval = await building(betaProject, [dep]);
    await failOn(dep, acmeServer);
    t.match(await row(dep), { status: 'queued', failed_for: [acme] }, 'queued again for beta');
    const since = published.length;
    await completeOn(dep, betaServer);
    t.match(await row(dep), { status: 'completed', done_for: [beta], failed_for: [acme], failure_reason: null }, 'the record: completed for beta');

    const acmeSees = await seen(acmeEval, dep);
    t.same(acmeSees.view, { status: 'failed', failure: { class: 'FailedPermanent', reason: 'builder_failed', message: 'builder failed' } }, 'acme\'s view: failed, with its failure');
    t.equal(acmeSees.single, 'failed', 'GET /builds/{id}');
    t.ok(acmeSees.failedInPage, 'the status filter finds it among the failed');
    t.equal(acmeSees.failedCount, 2, 'the page\'s counts: dep and its dependent');
    t.equal(acmeSees.evaluationCounts, 2, 'GET /evals/{id} counts');
    t.equal(acmeSees.logEnd, 'failed', 'the evaluation\'s log stream ends it as failed');
    t.same(acmeSees.report, { conclusion: 'failure', failed: ['acme-top:dependency_failed', 'dep:builder_failed'].sort() }, 'acme\'s check run is red, with the reason');
    t.same((await graphs.graph(anonymous, await buildIdOf(acmeEval, acmeTop))).nodes.find((n) => n.drv_path === dep.drvPath)?.status, 'failed', 'the build graph');
    t.same(buildEvents(since, acmeEval), [{ type: 'build.failed', failure: 'FailedPermanent' }], 'acme\'s evaluation hears build.failed, not build.completed');
    t.equal((await db.sql<{ phase: string }[]>`select phase from evaluations where id = ${acmeEval}`)[0]!.phase, 'completed', 'acme\'s evaluation has ended');

    const buildCounts = async (org: string) => (await metrics.series(member, org, 'app', {})).builds
      .reduce((sum, b) => ({ completed: sum.completed + b.completed, failed: sum.failed + b.failed }), { completed: 0, failed: 0 });
    t.same(await buildCounts('acme'), { completed: 0, failed: 2 }, 'acme\'s project metrics count it failed');
    t.same(await buildCounts('beta'), { completed: 1, failed: 0 }, 'beta\'s count it completed');

    const betaSees = await seen(betaEval, dep);
    t.same(betaSees.view, { status: 'completed', failure: null }, 'beta reads its own completion');
    t.same([betaSees.single, betaSees.failedInPage, betaSees.evaluationCounts, betaSees.logEnd], ['completed', false, 0, 'completed']);
    t.same(betaSees.report.conclusion, 'success');
    t.same(buildEvents(since, betaEval), [{ type: 'build.completed', failure: undefined }]);

    progress.touched(await idOf(dep));
    await progress.flush();
    await waitFor(() => lastProgress(acmeEval) !== undefined && lastProgress(betaEval) !== undefined);
    t.match(lastProgress(acmeEval), { builds_total: 2, builds_done: 2, builds_failed: 2 }, 'acme\'s evaluation.progress counts it failed');
    t.match(lastProgress(betaEval), { builds_total: 1, builds_done: 1, builds_failed: 0 });
  });

  t.test('kiln\'s own worker\'s completion after acme\'s failure stands for everyone', async (t) => {
    const dep = derivationNode('dep2');
    const acmeEval = await building(acmeProject, [dep]);
    await building(betaProject, [dep]);
    await failOn(dep, acmeServer);
    const since = published.length;
    await completeOn(dep, kilnWorker);
    t.match(await row(dep), { status: 'completed', done_for: null, failed_for: null });
    const acmeSees = await seen(acmeEval, dep);
    t.same(acmeSees.view, { status: 'completed', failure: null }, 'an honest output: completed for acme too');
    t.same(acmeSees.report.conclusion, 'success');
    t.same(buildEvents(since, acmeEval), [{ type: 'build.completed', failure: undefined }]);
  });

  t.test('a completion that also stands for acme (a worker acme trusts) reads completed for acme, though its server failed it before', async (t) => {
    const dep = derivationNode('dep3');
    const acmeEval = await building(acmeProject, [dep]);
    await building(betaProject, [dep]);
    await failOn(dep, acmeServer);
    // a worker registered for projects of both organizations
    await completeOn(dep, { id: randomUUID(), projects: [acmeProject, betaProject] });
    t.match(await row(dep), { status: 'completed', done_for: [acme, beta].sort(), failed_for: [acme] });
    t.same((await seen(acmeEval, dep)).view, { status: 'completed', failure: null }, 'acme\'s own trusted worker built it: completed for acme');
  });
});
