// Each organization sees its own outcome of a shared build (docs/builds.md, "Whose failure";
// migration 0079, services/builds/organizationStatus.ts): acme's server fails a build, beta's
// server then completes it for beta. The record reads completed; acme still reads it failed, with
// its own failure, in every read of its evaluation (views, counts, progress, graph, log stream,
// events, the Git host report); beta reads completed; kiln's own worker's completion stands for
// everyone. The mirror case ("beta's own failure after acme's completion") is tenantScope.test.
import { randomUUID } from 'node:crypto';
import t from 'tap';
import { PROTOCOL_VERSION, type FailureReason, type MessageOf } from '../../../protocol/index.js';
import { anonymous, type Principal } from '../../../services/access/principal.js';
import { changeBuildStatuses } from '../../../services/builds/buildStatus.js';
import { BuildOutcomes } from '../../../services/builds/buildOutcomes.js';
import { buildControlService } from '../../../services/builds/buildControl.js';
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
    const [attempt] = await changeBuildStatuses(events, [{ id, change: { event: { type: 'dispatch' }, workerId: worker.id, workerProjects: worker.projects } }]);
    return { id, attempt: attempt! };
  };
  /** Fails it on the worker; `log`: the attempt's log, as the worker streamed it. */
  const failOn = async (node: DerivationNodeFixture, worker: Worker, failure: { class?: 'FailedPermanent' | 'FailedTimeout'; reason?: FailureReason; message?: string; log?: string } = {}) => {
    const { id, attempt } = await dispatch(node, worker);
    if (failure.log) await db.sql`insert into build_log_chunks (derivation_build_id, attempt, seq, data) values (${id}, ${attempt}, 0, ${Buffer.from(failure.log)})`;
    return outcomes.failed(id, attempt, { class: failure.class ?? 'FailedPermanent', reason: failure.reason ?? 'builder_failed', message: failure.message ?? 'builder failed' }, { logBytes: 0, logDroppedBytes: 0 });
  };
  const completeOn = async (node: DerivationNodeFixture, worker: Worker) => {
    await outcomes.completeSoon((await dispatch(node, worker)).id, { logBytes: 0, logDroppedBytes: 0 });
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
  const control = buildControlService({ sql: db.sql, events, evaluations: visible, scheduler: { wake: () => undefined } });

  /** What the evaluation's reads say of the build of `node`. */
  const seen = async (evaluationId: string, node: DerivationNodeFixture, { stream = true } = {}) => {
    const drv = node.drvPath;
    const build = (await views.evaluationBuilds(anonymous, evaluationId)).find((b) => b.drv_path === drv)!;
    const page = await views.evaluationBuildsPage(anonymous, evaluationId, { page: 1, per_page: 50, status: 'failed' });
    const lines: { type: string; drv_path: string; status?: string }[] = [];
    // the stream of a building evaluation waits for its builds: read only once it has ended
    for await (const chunk of stream ? await streams.evaluation(anonymous, evaluationId) : []) {
      lines.push(...Buffer.from(chunk).toString('utf8').trim().split('\n').map((l) => JSON.parse(l) as { type: string; drv_path: string; status?: string }));
    }
    const snapshot = (await evaluationSnapshot(db.sql, evaluationId))!;
    return {
      view: { status: build.status, failure: build.failure },
      single: (({ status, failure }) => ({ status, failure }))(await views.build(anonymous, build.build_id)),
      failedInPage: page.builds.some((b) => b.drv_path === drv),
      failedCount: page.counts.failed,
      evaluationCounts: (await evaluationsRead.get(member, evaluationId)).builds.failed,
      logEnd: lines.find((l) => l.type === 'end' && l.drv_path === drv)?.status,
      report: { conclusion: reportContent(snapshot, 'https://kiln.test').conclusion, failed: snapshot.failedBuilds.map((f) => `${f.name}:${f.reason}`).sort() },
      logHeads: snapshot.failedBuilds.map((f) => f.logHead),
    };
  };
  const content = (e: { frame: string }) => (JSON.parse(e.frame) as { content: Record<string, unknown> }).content;
  const lastProgress = (evaluationId: string) =>
    published.filter((e) => e.event === 'evaluation.progress' && content(e).evaluation_id === evaluationId).map(content).at(-1);
  const buildEvents = (since: number, evaluationId: string, which = /^build\.(completed|failed)$/) =>
    published.slice(since).filter((e) => which.test(e.event) && content(e).evaluation_id === evaluationId)
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
    t.same(acmeSees.single, acmeSees.view, 'GET /builds/{id}');
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
    t.same([betaSees.single.status, betaSees.failedInPage, betaSees.evaluationCounts, betaSees.logEnd], ['completed', false, 0, 'completed']);
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

  // Review of the above (h45): the record's failure may be another organization's, in any status.
  t.test('acme\'s failure, queued again for beta: beta reads no failure and hears no build.failed', async (t) => {
    const dep = derivationNode('dep-a');
    const acmeEval = await building(acmeProject, [dep]);
    const betaEval = await building(betaProject, [dep]);
    const since = published.length;
    await failOn(dep, acmeServer, { reason: 'hash_mismatch', message: 'acme\'s secret' });
    t.match(await row(dep), { status: 'queued', failed_for: [acme], failure_reason: 'hash_mismatch' }, 'queued again for beta, the failure kept');
    const betaSees = await seen(betaEval, dep, { stream: false });
    t.same(betaSees.view, { status: 'queued', failure: null }, 'GET /evals/{id}/builds: not acme\'s failure');
    t.same(betaSees.single, { status: 'queued', failure: null }, 'GET /builds/{id}');
    t.same(buildEvents(since, betaEval, /^build\.(failed|queued)$/), [{ type: 'build.queued', failure: undefined }], 'beta\'s evaluation hears its re-queue only');
    t.same(buildEvents(since, acmeEval), [{ type: 'build.failed', failure: 'FailedPermanent' }], 'acme\'s hears its failure');
    t.same((await seen(acmeEval, dep, { stream: false })).view.failure, { class: 'FailedPermanent', reason: 'hash_mismatch', message: 'acme\'s secret' }, 'acme reads its own');
  });

  t.test('both servers fail it: each organization reads its own failure and its own attempt\'s log', async (t) => {
    const dep = derivationNode('dep-b');
    const acmeEval = await building(acmeProject, [dep]);
    const betaEval = await building(betaProject, [dep]);
    await failOn(dep, acmeServer, { class: 'FailedTimeout', reason: 'timeout', message: 'acme timed out', log: 'acme log line' });
    const since = published.length;
    await failOn(dep, betaServer, { reason: 'builder_failed', message: 'beta failed', log: 'beta log line' });
    t.match(await row(dep), { status: 'failed', failed_for: [acme, beta].sort(), failure_reason: 'builder_failed' }, 'the record holds beta\'s, the last');
    const acmeSees = await seen(acmeEval, dep);
    t.same(acmeSees.view, { status: 'failed', failure: { class: 'FailedTimeout', reason: 'timeout', message: 'acme timed out' } }, 'acme\'s view: its own failure');
    t.same(acmeSees.single, acmeSees.view, 'GET /builds/{id}');
    t.same(acmeSees.report.failed, ['dep-b:timeout'], 'acme\'s check run: its reason');
    t.match(acmeSees.logHeads, [/acme log line/], 'and its attempt\'s log, not beta\'s later one');
    t.same(buildEvents(since, acmeEval), [{ type: 'build.failed', failure: 'FailedTimeout' }], 'acme\'s evaluation hears its own class');
    const betaSees = await seen(betaEval, dep);
    t.same(betaSees.view, { status: 'failed', failure: { class: 'FailedPermanent', reason: 'builder_failed', message: 'beta failed' } });
    t.match(betaSees.logHeads, [/beta log line/]);
  });

  t.test('acme\'s server completes it, beta\'s fails it: acme reads completed, with no failure, and hears build.completed', async (t) => {
    const dep = derivationNode('dep-c');
    const other = derivationNode('other-c');
    const acmeEval = await building(acmeProject, [dep, other]); // other keeps acme's evaluation building
    const betaEval = await building(betaProject, [dep]);
    await completeOn(dep, acmeServer);
    t.match(await row(dep), { status: 'queued', done_for: [acme] }, 'queued again for beta');
    const since = published.length;
    await failOn(dep, betaServer, { reason: 'builder_failed', message: 'beta\'s secret', log: 'beta log line' });
    t.match(await row(dep), { status: 'failed', done_for: [acme], failed_for: [beta] });
    const acmeSees = await seen(acmeEval, dep, { stream: false });
    t.same(acmeSees.view, { status: 'completed', failure: null }, 'acme\'s view: its completion');
    t.same(acmeSees.single, acmeSees.view, 'GET /builds/{id}');
    t.same([acmeSees.failedInPage, acmeSees.failedCount, acmeSees.evaluationCounts, acmeSees.report.failed], [false, 0, 0, []], 'counts and check run');
    t.same(buildEvents(since, acmeEval), [{ type: 'build.completed', failure: undefined }], 'acme\'s evaluation hears build.completed');
    progress.touched(await idOf(dep));
    await progress.flush();
    await waitFor(() => lastProgress(acmeEval) !== undefined);
    t.match(lastProgress(acmeEval), { builds_total: 2, builds_done: 1, builds_failed: 0 }, 'acme\'s evaluation.progress');
    t.same((await seen(betaEval, dep)).view, { status: 'failed', failure: { class: 'FailedPermanent', reason: 'builder_failed', message: 'beta\'s secret' } });
    await t.rejects(control.act(member, await buildIdOf(acmeEval, dep), 'restart'), { code: 'build_not_failed', message: /is completed/ },
      'acme cannot restart (and so re-queue for everyone) what reads completed for it');
  });

  t.test('a build that reads failed for acme over beta\'s completion: restarting it says why it cannot be', async (t) => {
    const dep = derivationNode('dep-e');
    const acmeEval = await building(acmeProject, [dep, derivationNode('other-e')]);
    await building(betaProject, [dep]);
    await failOn(dep, acmeServer);
    await completeOn(dep, betaServer);
    t.equal((await seen(acmeEval, dep, { stream: false })).view.status, 'failed');
    await t.rejects(control.act(member, await buildIdOf(acmeEval, dep), 'restart'), { code: 'build_not_failed', message: /another organization's completion/ });
    t.match(await row(dep), { status: 'completed', failed_for: [acme] }, 'nothing changed');
  });

  t.test('an organization in failed_for deleted since: a dependency failure still lands for the others', async (t) => {
    const gammaProject = await insertProject(db.sql, 'gamma', 'app');
    const gamma = await orgOf(gammaProject);
    const gammaServer = await serverOf(gamma, gammaProject);
    const dep = derivationNode('dep-d');
    const top = derivationNode('top-d', [dep.drvPath]);
    await building(gammaProject, [dep]);
    const betaEval = await building(betaProject, [dep, top]);
    await failOn(dep, gammaServer);
    t.match(await row(dep), { status: 'queued', failed_for: [gamma] });
    await db.sql`delete from organizations where id = ${gamma}`;
    await failOn(dep, betaServer);
    t.match(await row(top), { status: 'failed', failed_for: [gamma, beta].sort() }, 'beta\'s dependent failed (failed_for still names gamma)');
    t.match((await seen(betaEval, top)).view, { status: 'failed', failure: { class: 'FailedPermanent', reason: 'dependency_failed', message: /an input of this derivation failed/ } }, 'with beta\'s kept failure');
    t.equal((await db.sql<{ phase: string }[]>`select phase from evaluations where id = ${betaEval}`)[0]!.phase, 'completed', 'beta\'s evaluation ended');
  });
});
