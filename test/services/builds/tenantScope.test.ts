// Whose completion, whose failure (docs/builds.md, "Build servers: whose completion"; migrations
// 0072, 0073): what a worker only some organizations trust did (an organization's build server, a
// worker registered per project) stands for those organizations only, as the dispatch recorded
// them. Another organization's evaluation queues such a build again for itself when it starts
// building, or in the outcome's own transaction when it is building already; the ready query then
// offers it to that organization's projects only; one still evaluating holds nothing; when the
// other organization leaves, the restore pass puts it back as it was. The real-Nix case, with a
// hostile server, is test/cli/buildServersTenants.process.test.ts.
import { randomUUID } from 'node:crypto';
import t from 'tap';
import postgres from 'postgres';
import { PROTOCOL_VERSION, type MessageOf } from '../../../protocol/index.js';
import { changeBuildStatuses, type StatusChange } from '../../../services/builds/buildStatus.js';
import { BuildOutcomes } from '../../../services/builds/buildOutcomes.js';
import { failureFor, statusFor } from '../../../services/builds/organizationStatus.js';
import { buildProgressReporter } from '../../../services/builds/buildProgress.js';
import { EvaluationProgress } from '../../../services/builds/evaluationProgress.js';
import { applyPhaseChange, changePhase } from '../../../services/builds/evaluationPhases.js';
import { recordEvalBatch } from '../../../services/builds/graphRecorder.js';
import { readyBuilds, type ReadiedBuild } from '../../../services/builds/schedulerQueries.js';
import { systemClock } from '../../../supervisors/index.js';
import { testDatabase } from '../../support/db.js';
import { derivationNode, type DerivationNodeFixture } from '../../support/derivationNodes.js';
import { insertProject } from '../../support/modelRows.js';
import { testEvents } from '../../support/testEvents.js';

t.test('an outcome on a worker only some organizations trust stands for them only', async (t) => {
  const db = await testDatabase(t);
  const { events } = await testEvents(t, db);
  const acmeProject = await insertProject(db.sql, 'acme', 'app');
  const betaProject = await insertProject(db.sql, 'beta', 'app');
  const orgOf = async (project: string) => (await db.sql<{ organization_id: string }[]>`select organization_id from projects where id = ${project}`)[0]!.organization_id;
  const acme = await orgOf(acmeProject);
  const beta = await orgOf(betaProject);
  const serverOf = async (org: string, name: string) =>
    (await db.sql<{ id: string }[]>`insert into servers (organization_id, name, host) values (${org}, ${name}, 'box.test') returning id`)[0]!.id;
  // a build server's worker serves its organization's projects (its handshake pass); its id is the server's
  const acmeServer = { id: await serverOf(acme, 'box'), projects: [acmeProject] };
  const betaServer = { id: await serverOf(beta, 'box'), projects: [betaProject] };
  const kilnWorker = { id: randomUUID(), projects: null };
  type Worker = { id: string; projects: string[] | null };

  const evaluation = async (project: string, phase: 'evaluating' | 'building' = 'evaluating') => {
    const [task] = await db.sql<{ id: string }[]>`
      insert into tasks (project_id, name) values (${project}, 'default')
      on conflict (project_id, name) do update set name = excluded.name returning id`;
    const id = randomUUID();
    await db.sql`insert into evaluations (id, task_id, repository, wildcard, phase) values (${id}, ${task!.id}, 'file:///nonexistent', '*', ${phase})`;
    return id;
  };
  const startBuilding = (evaluationId: string) => changePhase(events, evaluationId, { event: { type: 'succeed' } });
  const record = (evaluationId: string, nodes: DerivationNodeFixture[]) => {
    const batch: MessageOf<'evalBatch'> = { v: PROTOCOL_VERSION, t: 'evalBatch', jobId: `eval:${evaluationId}:1`, derivations: nodes.map((n) => n.derivation), attributes: [], errors: [] };
    return recordEvalBatch(events, evaluationId, batch);
  };
  /** an evaluation of `project` that recorded these nodes and is building */
  const building = async (project: string, nodes: DerivationNodeFixture[]) => {
    const id = await evaluation(project);
    await record(id, nodes);
    await startBuilding(id);
    return id;
  };
  const idOf = async (node: DerivationNodeFixture) =>
    (await db.sql<{ id: string }[]>`select db.id from derivation_builds db join derivations d on d.id = db.derivation_id where d.drv_path = ${node.drvPath}`)[0]!.id;
  const row = async (node: DerivationNodeFixture) =>
    (await db.sql<{ status: string; done_for: string[] | null; failed_for: string[] | null; inputs_remaining: number; failure_reason: string | null }[]>`
      select db.status, db.done_for, db.failed_for, db.inputs_remaining, db.failure_reason
      from derivation_builds db join derivations d on d.id = db.derivation_id where d.drv_path = ${node.drvPath}`)[0]!;
  /** the ready builds among these nodes, each with the projects it is offered for */
  const ready = async (nodes: DerivationNodeFixture[]) => {
    const names = new Map(nodes.map((n) => [n.drvPath, n.derivation.name]));
    const projectName = new Map([[acmeProject, 'acme'], [betaProject, 'beta']]);
    return Object.fromEntries((await readyBuilds(db.sql, 1000, new Date())).filter((r) => names.has(r.drv_path))
      .map((r) => [names.get(r.drv_path)!, r.projects.map((p) => projectName.get(p)).sort()]));
  };
  const change = (ids: string[], c: StatusChange) => changeBuildStatuses(events, ids.map((id) => ({ id, change: c })));
  const dispatchAttempt = async (node: DerivationNodeFixture, worker: Worker) => {
    const id = await idOf(node);
    const [attempt] = await change([id], { event: { type: 'dispatch' }, workerId: worker.id, workerProjects: worker.projects });
    return { id, attempt: attempt ?? 0 };
  };
  const dispatch = async (node: DerivationNodeFixture, worker: Worker) => (await dispatchAttempt(node, worker)).id;
  const buildOn = async (node: DerivationNodeFixture, worker: Worker, told: Pick<StatusChange, 'readied'> = {}) => {
    const id = await dispatch(node, worker);
    await change([id], { event: { type: 'succeed' }, ...told });
  };
  const publishErrors: unknown[] = [];
  const onError = (e: unknown) => publishErrors.push(e);
  const progress = new EvaluationProgress(db.sql, events, onError);
  const outcomes = new BuildOutcomes(db.sql, events, progress, buildProgressReporter(db.sql, events, systemClock, onError),
    () => undefined, { maxAttempts: 1, retryBackoffSecs: 1, inputsUnavailableMaxLoops: 1, clock: systemClock });
  const failOn = async (node: DerivationNodeFixture, worker: Worker) => {
    // the failure of the attempt just dispatched (a report of another attempt changes nothing)
    const { id, attempt } = await dispatchAttempt(node, worker);
    await outcomes.failed(id, attempt, { class: 'FailedPermanent', reason: 'builder_failed', message: 'builder failed' }, { logBytes: 0, logDroppedBytes: 0 });
  };

  t.test('reached after the completion: queued again when the other organization starts building, offered to its projects only', async (t) => {
    const dep = derivationNode('dep');
    const top = derivationNode('top', [dep.drvPath]);
    await building(acmeProject, [dep, top]);
    await buildOn(dep, acmeServer);
    t.match(await row(dep), { status: 'completed', done_for: [acme] }, 'completed, standing for acme');
    t.same(await ready([dep, top]), { top: ['acme'] }, 'acme\'s build of top goes on');

    const betaEval = await evaluation(betaProject);
    await record(betaEval, [dep, top]);
    t.match(await row(dep), { status: 'completed', done_for: [acme] }, 'beta still evaluating: it holds nothing');
    await startBuilding(betaEval);
    t.match(await row(dep), { status: 'queued', done_for: [acme] }, 'beta does not take acme\'s server\'s word: queued again, acme remembered');
    t.equal((await row(top)).inputs_remaining, 1, 'top waits for dep again');
    t.same(await ready([dep, top]), { dep: ['beta'] }, 'offered to beta\'s projects only: acme\'s server serves none of them');

    await buildOn(dep, betaServer);
    t.match(await row(dep), { status: 'completed', done_for: [acme, beta].sort() }, 'beta\'s own server adds beta');
    t.same(await ready([dep, top]), { top: ['acme', 'beta'] });
    await building(betaProject, [dep, top]);
    t.equal((await row(dep)).status, 'completed', 'a later beta evaluation takes it as built');
  });

  t.test('wanted by a building evaluation of the other organization when the completion commits: queued again in the same transaction', async (t) => {
    const dep = derivationNode('dep');
    const top = derivationNode('top', [dep.drvPath]);
    await building(acmeProject, [dep, top]);
    const betaEval = await building(betaProject, [dep, top]);
    const readied: string[] = [];
    await buildOn(dep, acmeServer, { readied: (rows: ReadiedBuild[]) => readied.push(...rows.map((r) => r.drv_path)) });
    t.match(await row(dep), { status: 'queued', done_for: [acme] });
    t.same(readied, [], 'top was never made ready on an output beta cannot read');
    t.equal((await row(top)).inputs_remaining, 1);
    t.same(await ready([dep, top]), { dep: ['beta'] });

    await db.sql`update evaluations set phase = 'aborted' where id = ${betaEval}`;
    t.same(await ready([dep, top]), {}, 'wanted by no project: the ready query does not return it (no reload on every pass)');
    t.ok((await outcomes.restoreAbandoned()).includes(await idOf(dep)), 'beta left: the restore pass finds it and restores it');
    t.match(await row(dep), { status: 'completed', done_for: [acme] }, 'standing for acme, as it did');
    t.equal((await row(top)).inputs_remaining, 0, 'acme\'s top is ready again');
    t.same(await ready([dep, top]), { top: ['acme'] });
  });

  t.test('outputs evicted between beta\'s recording and its building: beta still queues it for itself', async (t) => {
    const dep = derivationNode('dep');
    await building(acmeProject, [dep]);
    await buildOn(dep, acmeServer);
    const betaEval = await evaluation(betaProject);
    await record(betaEval, [dep]);
    await db.sql`update derivation_builds set outputs_cached = false where id = ${await idOf(dep)}`;
    await startBuilding(betaEval);
    t.match(await row(dep), { status: 'queued', done_for: [acme] }, 'not taken as beta\'s own on acme\'s server\'s word');
    t.same(await ready([dep]), { dep: ['beta'] });
  });

  t.test('an evaluation still evaluating holds nothing: the build is completed for acme until beta builds', async (t) => {
    const dep = derivationNode('dep');
    const top = derivationNode('top', [dep.drvPath]);
    await building(acmeProject, [dep, top]);
    const betaEval = await evaluation(betaProject);
    await record(betaEval, [dep, top]);
    await buildOn(dep, acmeServer);
    t.match(await row(dep), { status: 'completed', done_for: [acme] }, 'not queued again for an evaluation that may evaluate forever');
    t.same(await ready([dep, top]), { top: ['acme'] }, 'acme goes on');
    t.notOk((await outcomes.restoreAbandoned()).includes(await idOf(dep)), 'nothing to restore');
    await startBuilding(betaEval);
    t.match(await row(dep), { status: 'queued', done_for: [acme] }, 'beta building: queued again for it');
    t.same(await ready([dep, top]), { dep: ['beta'] });
  });

  t.test('a server deleted while its build runs: the completion still stands for its organization only', async (t) => {
    const dep = derivationNode('dep');
    await building(acmeProject, [dep]);
    const doomed = { id: await serverOf(acme, 'doomed'), projects: [acmeProject] };
    const id = await dispatch(dep, doomed);
    await db.sql`delete from servers where id = ${doomed.id}`;
    await change([id], { event: { type: 'succeed' } });
    t.match(await row(dep), { status: 'completed', done_for: [acme] }, 'scoped at dispatch');
  });

  t.test('a worker registered per project: its completion stands for its projects\' organizations', async (t) => {
    const dep = derivationNode('dep');
    await building(betaProject, [dep]);
    await buildOn(dep, { id: randomUUID(), projects: [betaProject] });
    t.match(await row(dep), { status: 'completed', done_for: [beta] });
    await building(acmeProject, [dep]);
    t.match(await row(dep), { status: 'queued' }, 'acme queues it again for itself');
  });

  t.test('a pass\'s batch of dispatches scopes each build by its own worker', async (t) => {
    const one = derivationNode('one');
    const two = derivationNode('two');
    const three = derivationNode('three');
    await building(acmeProject, [one, two, three]);
    const workers = [acmeServer, { id: randomUUID(), projects: [acmeProject, betaProject] }, kilnWorker];
    const ids = await Promise.all([one, two, three].map(idOf));
    await changeBuildStatuses(events, ids.map((id, i) => ({ id, change: { event: { type: 'dispatch' }, workerId: workers[i]!.id, workerProjects: workers[i]!.projects } })));
    await changeBuildStatuses(events, ids.map((id) => ({ id, change: { event: { type: 'succeed' } } })));
    t.match(await row(one), { done_for: [acme] });
    t.match(await row(two), { done_for: [acme, beta].sort() }, 'registered for both organizations\' projects: stands for both');
    t.match(await row(three), { done_for: null });
  });

  t.test('kiln\'s own worker\'s completion stands for every tenant', async (t) => {
    const dep = derivationNode('dep');
    await building(acmeProject, [dep]);
    await buildOn(dep, acmeServer);
    await building(betaProject, [dep]);
    t.equal((await row(dep)).status, 'queued');
    await buildOn(dep, kilnWorker);
    t.match(await row(dep), { status: 'completed', done_for: null }, 'built by a shared worker: done for everyone');
    await building(betaProject, [dep]);
    t.equal((await row(dep)).status, 'completed');
  });

  t.test('a failure on acme\'s server fails acme\'s own dependents; beta\'s building evaluation gets the build queued again', async (t) => {
    const dep = derivationNode('dep');
    const top = derivationNode('top', [dep.drvPath]);
    const acmeOnly = derivationNode('acme-only', [dep.drvPath]);
    await building(acmeProject, [dep, top, acmeOnly]);
    await building(betaProject, [dep, top]);
    await failOn(dep, acmeServer);
    t.match(await row(dep), { status: 'queued', failed_for: [acme], failure_reason: 'builder_failed' }, 'queued again for beta, the failure remembered');
    t.match(await row(acmeOnly), { status: 'failed', failure_reason: 'dependency_failed', failed_for: [acme] }, 'acme\'s own dependent fails');
    t.match(await row(top), { status: 'queued' }, 'a dependent beta wants waits');
    t.same(await ready([dep, top, acmeOnly]), { dep: ['beta'] }, 'offered to beta only: acme has its failure');

    await buildOn(dep, kilnWorker);
    t.match(await row(dep), { status: 'completed', done_for: null, failed_for: null }, 'kiln\'s own worker built it: done for everyone');
    t.same(await ready([dep, top, acmeOnly]), { top: ['acme', 'beta'] });
  });

  t.test('a failure while beta still evaluates fails the build; beta queues it and its failed dependents again when it starts building', async (t) => {
    const dep = derivationNode('dep');
    const top = derivationNode('top', [dep.drvPath]);
    await building(acmeProject, [dep, top]);
    const betaEval = await evaluation(betaProject);
    await record(betaEval, [dep, top]);
    await failOn(dep, acmeServer);
    t.match(await row(dep), { status: 'failed', failed_for: [acme] });
    t.match(await row(top), { status: 'failed', failure_reason: 'dependency_failed', failed_for: [acme] });
    await startBuilding(betaEval);
    t.match(await row(dep), { status: 'queued', failed_for: [acme] }, 'acme\'s server\'s failure is not beta\'s');
    t.match(await row(top), { status: 'queued', inputs_remaining: 1 });
    t.same(await ready([dep, top]), { dep: ['beta'] });

    await db.sql`update evaluations set phase = 'aborted' where id = ${betaEval}`;
    t.ok((await outcomes.restoreAbandoned()).includes(await idOf(dep)), 'beta left: restored');
    t.match(await row(dep), { status: 'failed', failed_for: [acme], failure_reason: 'builder_failed' }, 'failed as it was');
    t.match(await row(top), { status: 'failed', failure_reason: 'dependency_failed' }, 'and its dependent with it');
  });

  t.test('beta\'s own failure after acme\'s completion: acme\'s dependents go on once beta no longer builds it', async (t) => {
    const dep = derivationNode('dep');
    const top = derivationNode('top', [dep.drvPath]);
    const acmeEval = await building(acmeProject, [dep, top]);
    await buildOn(dep, acmeServer);
    const betaEval = await building(betaProject, [dep]);
    t.match(await row(dep), { status: 'queued', done_for: [acme] }, 'queued again for beta');
    t.equal((await row(top)).inputs_remaining, 1, 'acme\'s top waits for it again');
    await failOn(dep, betaServer);
    t.match(await row(dep), { status: 'failed', done_for: [acme], failed_for: [beta] }, 'beta\'s server failed it: for beta');
    t.equal((await row(top)).status, 'queued', 'acme\'s top is not failed on beta\'s failure');
    await db.sql`update evaluations set phase = 'building' where id = ${betaEval}`;
    t.notOk((await outcomes.restoreAbandoned()).includes(await idOf(dep)), 'beta still building: beta sees its own failure');
    await db.sql`update evaluations set phase = 'failed' where id = ${betaEval}`;
    t.ok((await outcomes.restoreAbandoned()).includes(await idOf(dep)), 'beta done: the restore pass finds it');
    t.match(await row(dep), { status: 'completed', done_for: [acme], failed_for: [beta] }, 'acme\'s completion stands again; beta\'s failure is remembered');
    const seenBy = async (org: string) => (await db.sql<{ status: string; failure_reason: string | null }[]>`
      select ${statusFor(db.sql, db.sql`${org}::uuid`)} as status, ${failureFor(db.sql, db.sql`${org}::uuid`, 'reason')} as failure_reason
      from derivation_builds db where db.id = ${await idOf(dep)}`)[0]!;
    t.same(await seenBy(beta), { status: 'failed', failure_reason: 'builder_failed' }, 'beta reads its own failure (organizationStatus.ts)');
    t.same(await seenBy(acme), { status: 'completed', failure_reason: null }, 'acme reads its completion');
    t.equal((await row(top)).inputs_remaining, 0, 'acme\'s top is ready again (it would have waited forever)');
    t.same(await ready([dep, top]), { top: ['acme'] });
    t.equal((await db.sql<{ phase: string }[]>`select phase from evaluations where id = ${acmeEval}`)[0]!.phase, 'building', 'acme\'s evaluation goes on');
  });

  t.test('kiln\'s own worker\'s failure stands for every tenant', async (t) => {
    const dep = derivationNode('dep');
    await building(acmeProject, [dep]);
    const betaEval = await evaluation(betaProject);
    await record(betaEval, [dep]);
    await failOn(dep, kilnWorker);
    await startBuilding(betaEval);
    t.match(await row(dep), { status: 'failed', failed_for: null }, 'beta takes it as failed');
  });

  t.test('a completion committing while beta starts building waits for it, and queues the build again for beta', async (t) => {
    const dep = derivationNode('dep');
    await building(acmeProject, [dep]);
    const betaEval = await evaluation(betaProject);
    await record(betaEval, [dep]);
    const id = await dispatch(dep, acmeServer);
    // beta's claim runs up to its commit on a connection of its own and holds there
    const other = postgres(db.url, { max: 1, onnotice: () => undefined });
    t.teardown(() => other.end());
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let claimed!: () => void;
    const claimedNow = new Promise<void>((resolve) => (claimed = resolve));
    const claim = other.begin(async (tx) => {
      await applyPhaseChange(tx, () => undefined, betaEval, { event: { type: 'succeed' } });
      claimed();
      await held;
    });
    await claimedNow;
    t.equal((await row(dep)).status, 'started', 'the claim found it running');
    let committed = false;
    const completion = change([id], { event: { type: 'succeed' } }).then(() => (committed = true));
    // the completion waits for beta's lock on the running build (without the lock it commits at once)
    for (;;) {
      const [waiting] = await db.sql<{ n: number }[]>`
        select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and query like '%update derivation_builds%'`;
      if (waiting!.n > 0 || committed) break;
      await new Promise((resolve) => setImmediate(resolve));
    }
    release();
    await claim;
    await completion;
    t.match(await row(dep), { status: 'queued', done_for: [acme] }, 'the completion saw beta building and queued it again for beta');
  });

  t.test('progress published without an error', async (t) => {
    await progress.stop();
    t.same(publishErrors, []);
  });
});
