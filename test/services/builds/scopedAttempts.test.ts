// Whose attempts (docs/builds.md, "Whose attempts"; migration 0086), on a real server with
// protocol-level workers (no Nix) and a clock the test steps: acme and beta build the same
// derivation; acme's own worker (registered for acme's project) takes the shared build and hangs up
// after it began, or fails it. Those attempts count against acme only: the build fails for acme once
// acme has spent build.maxAttempts (2), while beta still has all of its own, on kiln's own worker.
import { randomUUID } from 'node:crypto';
import t, { type Test } from 'tap';
import argon2 from 'argon2';
import { jobFailure } from '../../../protocol/index.js';
import { startTestKiln } from '../../support/kiln.js';
import { subscribedProject } from '../../support/subscribedProject.js';
import { signUp } from '../../support/accounts.js';
import { createTestCache } from '../../support/caches.js';
import { steppedClock } from '../../support/clock.js';
import { eventually } from '../../support/events.js';
import { handshake, testHello, type ProtoClient } from '../../support/protoClient.js';
import { derivationNode, narHash, type DerivationNodeFixture } from '../../support/derivationNodes.js';
import { BuildOutcomes } from '../../../services/builds/buildOutcomes.js';
import { buildProgressReporter } from '../../../services/builds/buildProgress.js';
import { EvaluationProgress } from '../../../services/builds/evaluationProgress.js';
import { requeueOrphanedJobs } from '../../../services/builds/schedulerQueries.js';
import { systemClock } from '../../../supervisors/index.js';

type Row = { status: string; attempts: number; failed_for: string[] | null; failure_reason: string | null };
const BUILD = { eval: false, build: true, fetch: true, federate: false };

async function twoTenants(t: Test, maxAttempts = 2) {
  const clock = steppedClock(new Date());
  const kiln = await startTestKiln(t, { localWorker: true, 'proto.workerHeartbeatTimeoutSecs': 0, 'build.maxAttempts': maxAttempts }, { clock });
  const acme = await subscribedProject(kiln);
  const bob = await signUp(kiln, 'bob');
  t.equal((await kiln.api('PUT', '/orgs', { token: bob.token, body: { name: 'beta' } })).status, 200);
  t.equal((await kiln.api('PUT', '/projects/beta', { token: bob.token, body: { name: 'app', repository: 'file:///nonexistent', wildcard: 'packages.x86_64-linux.*' } })).status, 200);
  const [beta] = await kiln.sql<{ id: string; organization_id: string }[]>`
    select p.id, p.organization_id from projects p join organizations o on o.id = p.organization_id where o.name = 'beta'`;
  const betaCache = await createTestCache(kiln.sql, 'beta-main', { ownerId: bob.id });
  await kiln.sql`insert into subscriptions (project_id, cache_id, mode) values (${beta!.id}, ${betaCache.id}, 0)`;
  const [acmeOrg] = await kiln.sql<{ organization_id: string }[]>`select organization_id from projects where id = ${acme.projectId}`;
  // acme's own worker: registered for acme's project, so what it does stands for acme alone
  const acmeToken = 'a'.repeat(64);
  await kiln.sql`insert into worker_registrations (project_id, token_hash) values (${acme.projectId}, ${await argon2.hash(acmeToken, { type: argon2.argon2id })})`;
  // and beta's own, for beta's project
  const betaToken = 'b'.repeat(64);
  await kiln.sql`insert into worker_registrations (project_id, token_hash) values (${beta!.id}, ${await argon2.hash(betaToken, { type: argon2.argon2id })})`;

  const url = `ws://127.0.0.1:${kiln.port}/proto`;
  const evaluator = await handshake(url, testHello({ capabilities: { eval: true, build: false, fetch: true, federate: false } }));
  t.teardown(() => evaluator.close());
  await evaluator.next('welcome');
  const connected = async (client: ProtoClient) => {
    t.teardown(() => client.close());
    await client.next('welcome');
    return client;
  };
  /** a new connection of acme's worker (a new worker id: a lost build pauses for the worker that lost it) */
  const acmeWorker = async () => connected(await handshake(url, testHello({ workerId: randomUUID(), open: false, capabilities: BUILD, maxConcurrentBuilds: 1 }), [{ project: acme.projectId, token: acmeToken }]));
  const betaWorker = async () => connected(await handshake(url, testHello({ workerId: randomUUID(), open: false, capabilities: BUILD, maxConcurrentBuilds: 1 }), [{ project: beta!.id, token: betaToken }]));
  /** kiln's own worker (open mode): its attempts count for every organization */
  const kilnWorker = async () => connected(await handshake(url, testHello({ workerId: randomUUID(), capabilities: BUILD, maxConcurrentBuilds: 1 })));

  /** evaluations of the derivation by these organizations, building once this returns */
  const evaluate = async (n: DerivationNodeFixture | DerivationNodeFixture[], ...orgs: ('acme' | 'beta')[]) => {
    // several nodes: the last is the attribute, the others its inputs
    const nodes = Array.isArray(n) ? n : [n];
    const top = nodes[nodes.length - 1]!;
    for (const org of orgs) {
      const [project, token] = org === 'acme' ? [acme.projectId, acme.token] : [beta!.id, bob.token];
      t.equal((await kiln.api('POST', `/tasks/${project}/default/evaluate`, { token, body: { commit: 'a'.repeat(40) } })).status, 200);
      const evalJob = await evaluator.next('evalJob');
      evaluator.send({ t: 'evalBatch', jobId: evalJob.jobId, derivations: nodes.map((m) => m.derivation),
        attributes: [{ path: ['packages', 'x86_64-linux', 'n'], drvPath: top.drvPath, outputs: { out: top.out } }], errors: [] });
      evaluator.send({ t: 'evalResult', jobId: evalJob.jobId, commit: 'a'.repeat(40), derivationCount: 1, attributeCount: 1, errorCount: 0, durationMs: 1 });
      await eventually(`${org}'s evaluation builds`, async () => {
        const [r] = await kiln.sql<{ n: number }[]>`
          select count(*)::int as n from evaluations e join tasks t on t.id = e.task_id join projects p on p.id = t.project_id
          where p.id = ${project} and e.phase <> 'queued' and e.phase <> 'evaluating'`;
        return r!.n > 0 ? true : undefined;
      });
    }
  };
  /** acme's and beta's evaluations of the same derivation, both building before any build worker connects */
  const bothEvaluate = (n: DerivationNodeFixture) => evaluate(n, 'acme', 'beta');
  const row = async (n: DerivationNodeFixture) => (await kiln.sql<Row[]>`
    select db.status, db.attempts, db.failed_for, db.failure_reason from derivation_builds db
    join derivations d on d.id = db.derivation_id where d.drv_path = ${n.drvPath}`)[0]!;
  const rowWhen = (n: DerivationNodeFixture, what: string, until: (r: Row) => boolean) => eventually(what, async () => {
    const r = await row(n);
    return until(r) ? r : undefined;
  });
  /** the build as each organization's evaluation sees it (GET /evals/{id}/builds) */
  const seen = async () => {
    const views: Record<string, string> = {};
    for (const [org, token] of [['acme', acme.token], ['beta', bob.token]] as const) {
      const [e] = await kiln.sql<{ id: string }[]>`
        select e.id from evaluations e join tasks t on t.id = e.task_id join projects p on p.id = t.project_id
        join organizations o on o.id = p.organization_id where o.name = ${org}`;
      views[org] = (await kiln.api<{ status: string }[]>('GET', `/evals/${e!.id}/builds`, { token })).message[0]!.status;
    }
    return views;
  };
  /** the failures kept per organization (organizationStatus.ts) */
  const keptFailures = () => kiln.sql<{ organization_id: string; failure_reason: string }[]>`
    select organization_id, failure_reason from derivation_build_scoped_failures order by organization_id`;
  /** `worker` takes the build's next job and logs from it (the build began there) */
  const take = async (worker: ProtoClient) => {
    await kiln.scheduler.passNow();
    const job = await worker.next('buildJob');
    worker.send({ t: 'jobAccepted', jobId: job.jobId });
    worker.send({ t: 'buildLog', jobId: job.jobId, seq: 0, data: Buffer.from('building\n'), droppedBytes: 0 });
    return job;
  };
  const hangUp = async (worker: ProtoClient) => {
    worker.close();
    await worker.closed;
  };
  const failTransiently = (worker: ProtoClient, jobId: string) =>
    worker.send({ t: 'jobFailed', jobId, failure: jobFailure('network', 'the network went away'), durationMs: 1, logBytes: 0, logDroppedBytes: 0 });
  const complete = (worker: ProtoClient, jobId: string, n: DerivationNodeFixture) => worker.send({
    t: 'buildResult', jobId, drvPath: n.drvPath, alreadyValid: false, durationMs: 1, logBytes: 0, logDroppedBytes: 0,
    outputs: [{ name: 'out', path: n.out, narHash: narHash(), narSize: 100, references: [], deriver: n.drvPath, ca: null }],
  });
  /** `worker` takes the build's next job and completes it; resolves once the row says so */
  const completeNext = async (worker: ProtoClient, n: DerivationNodeFixture) => {
    const job = await take(worker);
    complete(worker, job.jobId, n);
    await rowWhen(n, 'completed', (r) => r.status === 'completed');
  };
  /** `worker` takes the build's next job and fails it transiently; the row once that is decided */
  const failNext = async (worker: ProtoClient, n: DerivationNodeFixture, what: string) => {
    const job = await take(worker);
    failTransiently(worker, job.jobId);
    return rowWhen(n, what, (r) => r.status !== 'started');
  };
  return { kiln, clock, acmeOrg: acmeOrg!.organization_id, betaOrg: beta!.organization_id, bobToken: bob.token, keptFailures, acmeWorker, betaWorker, kilnWorker, evaluate, bothEvaluate, row, rowWhen, seen, take, hangUp, failTransiently, complete, completeNext, failNext };
}

t.test('acme\'s worker loses the shared build on all of build.maxAttempts: it fails for acme, beta still has its own attempts', async (t) => {
  const f = await twoTenants(t);
  const x = derivationNode('lost-by-acme');
  await f.bothEvaluate(x);
  for (const attempt of [1, 2]) {
    const worker = await f.acmeWorker();
    await f.take(worker);
    await f.rowWhen(x, `acme's worker took attempt ${attempt}`, (r) => r.status === 'started' && r.attempts === attempt);
    await f.hangUp(worker);
    await f.rowWhen(x, `attempt ${attempt}'s loss is decided`, (r) => r.status !== 'started');
  }
  t.match(await f.row(x), { status: 'queued', attempts: 2, failed_for: [f.acmeOrg], failure_reason: 'worker_lost' },
    'the second loss spent acme\'s last attempt: failed for acme, queued again for beta');
  t.same(await f.keptFailures(), [{ organization_id: f.acmeOrg, failure_reason: 'worker_lost' }], 'the failure is kept for acme alone');

  const kiln = await f.kilnWorker();
  t.match(await f.failNext(kiln, x, 'beta\'s first transient failure is decided'), { status: 'queued', attempts: 3 },
    'the first attempt beta spent: retried, not failed (acme\'s two count for acme only)');
  f.clock.step(30_000);
  await f.completeNext(kiln, x);
  t.equal((await f.seen()).beta, 'completed', 'beta gets the build');
});

t.test('acme\'s worker spends one attempt, kiln\'s own worker the next: the build fails for acme, not for beta', async (t) => {
  const f = await twoTenants(t);
  const x = derivationNode('failed-by-both');
  await f.bothEvaluate(x);
  const acme = await f.acmeWorker();
  t.match(await f.failNext(acme, x, 'acme\'s failure is decided'), { status: 'queued', attempts: 1, failed_for: null }, 'retried for everyone');
  await f.hangUp(acme);

  f.clock.step(30_000);
  const kiln = await f.kilnWorker();
  t.match(await f.failNext(kiln, x, 'the second failure is decided'), { status: 'queued', attempts: 2, failed_for: [f.acmeOrg] },
    'acme has spent build.maxAttempts 2 (its own worker\'s and kiln\'s): failed for acme; beta has spent one, kiln\'s: queued again for it');
  t.same(await f.keptFailures(), [{ organization_id: f.acmeOrg, failure_reason: 'network' }], 'the failure is kept for acme alone');
  const [waiting] = await f.kiln.sql<{ not_before: Date | null }[]>`
    select db.not_before from derivation_builds db join derivations d on d.id = db.derivation_id where d.drv_path = ${x.drvPath}`;
  t.equal(waiting?.not_before?.getTime(), f.clock.now().getTime() + 30_000, 'beta\'s retry waits build.retryBackoffSecs, as after its first attempt');

  f.clock.step(30_000);
  await f.completeNext(kiln, x);
  t.equal((await f.seen()).beta, 'completed', 'beta gets the build');
});

t.test('kiln\'s own worker spends build.maxAttempts: the build fails for everyone, as before', async (t) => {
  const f = await twoTenants(t);
  const x = derivationNode('failed-by-kiln');
  await f.bothEvaluate(x);
  const kiln = await f.kilnWorker();
  for (const attempt of [1, 2]) {
    if (attempt === 2) f.clock.step(30_000);
    const job = await f.take(kiln);
    f.failTransiently(kiln, job.jobId);
    await f.rowWhen(x, `attempt ${attempt} decided`, (r) => r.status !== 'started' && r.attempts === attempt);
  }
  t.match(await f.row(x), { status: 'failed', failed_for: null });
  t.same(await f.seen(), { acme: 'failed', beta: 'failed' });
});

t.test('acme\'s worker completes the shared build, which beta does not take: that attempt is not beta\'s either', async (t) => {
  const f = await twoTenants(t);
  const x = derivationNode('completed-by-acme');
  await f.bothEvaluate(x);
  const acme = await f.acmeWorker();
  const first = await f.take(acme);
  f.complete(acme, first.jobId, x);
  t.match(await f.rowWhen(x, 'acme\'s completion is decided', (r) => r.status !== 'started'), { status: 'queued', attempts: 1 }, 'queued again for beta');
  await f.hangUp(acme);

  const kiln = await f.kilnWorker();
  t.match(await f.failNext(kiln, x, 'beta\'s first failure is decided'), { status: 'queued', attempts: 2 },
    'the first attempt beta spent: retried (build.maxAttempts 2), not failed');
});

t.test('beta claims the build acme\'s worker failed for acme: fresh attempts, and acme\'s record of them goes with its count', async (t) => {
  const f = await twoTenants(t);
  const x = derivationNode('claimed-by-beta');
  await f.evaluate(x, 'acme');
  for (const attempt of [1, 2]) {
    const worker = await f.acmeWorker();
    await f.take(worker);
    await f.rowWhen(x, `acme's worker took attempt ${attempt}`, (r) => r.status === 'started' && r.attempts === attempt);
    await f.hangUp(worker);
    await f.rowWhen(x, `attempt ${attempt}'s loss is decided`, (r) => r.status !== 'started');
  }
  t.match(await f.row(x), { status: 'failed', failed_for: [f.acmeOrg] }, 'failed for acme, no one else building it');
  await f.evaluate(x, 'beta');
  t.match(await f.row(x), { status: 'queued', attempts: 0 }, 'beta starts building: queued again for it with fresh attempts');

  const kiln = await f.kilnWorker();
  for (const attempt of [1, 2]) {
    if (attempt === 2) f.clock.step(30_000);
    const job = await f.take(kiln);
    f.failTransiently(kiln, job.jobId);
    await f.rowWhen(x, `beta's attempt ${attempt} decided`, (r) => r.status !== 'started' && r.attempts === attempt);
  }
  t.match(await f.row(x), { status: 'failed', failed_for: null }, 'kiln\'s own worker spent beta\'s two attempts: failed (acme\'s earlier ones, gone with the count, do not stretch them)');
});

t.test('acme\'s worker fails the shared build once, then completes it for acme; kiln\'s worker then fails it twice for beta: acme is never exhausted, its dependent not failed', async (t) => {
  const f = await twoTenants(t, 3);
  const x = derivationNode('completed-then-failed');
  const y = derivationNode('needs-it', [x.drvPath]);
  await f.evaluate([x, y], 'acme');
  await f.evaluate(x, 'beta');
  const acme = await f.acmeWorker();
  const first = await f.take(acme);
  f.failTransiently(acme, first.jobId);
  await f.rowWhen(x, 'acme\'s failure is decided', (r) => r.status !== 'started');
  f.clock.step(30_000);
  const second = await f.take(acme);
  f.complete(acme, second.jobId, x);
  t.match(await f.rowWhen(x, 'acme\'s completion is decided', (r) => r.status !== 'started'), { status: 'queued', attempts: 2 }, 'queued again for beta');
  await f.hangUp(acme);

  const kiln = await f.kilnWorker();
  const yDone = async () => (await f.row(y)).status === 'completed';
  let failures = 0;
  while (failures < 2 || !(await yDone())) {
    const job = await f.take(kiln);
    if (job.drvPath === y.drvPath) {
      f.complete(kiln, job.jobId, y);
      await f.rowWhen(y, 'acme\'s dependent completed', (r) => r.status === 'completed');
    } else if (failures < 2) {
      f.failTransiently(kiln, job.jobId);
      failures++;
      await f.rowWhen(x, `kiln's failure ${failures} decided`, (r) => r.status !== 'started');
      if (failures === 2) {
        t.match(await f.row(x), { status: 'queued', attempts: 4, failed_for: null },
          'acme (done_for) has spent 3 with acme\'s failure and kiln\'s two, but it has its outcome: not exhausted; beta has spent 2 of 3');
        t.same(await f.keptFailures(), [], 'no failure kept for acme');
        t.not((await f.row(y)).status, 'failed', 'acme\'s dependent is not failed');
      }
      f.clock.step(120_000);
    } else {
      f.complete(kiln, job.jobId, x);
      await f.rowWhen(x, 'completed for beta', (r) => r.status === 'completed');
    }
  }
  t.equal((await f.row(y)).status, 'completed', 'acme\'s dependent completes');
});

t.test('beta\'s count reaches build.maxAttempts with an orphaned attempt: acme\'s worker\'s failure then does not end the build for beta, nor keep acme\'s failure for it', async (t) => {
  const f = await twoTenants(t, 3);
  const x = derivationNode('spent-by-beta');
  await f.bothEvaluate(x);
  const beta = await f.betaWorker();
  for (const attempt of [1, 2]) {
    const job = await f.take(beta);
    f.failTransiently(beta, job.jobId);
    await f.rowWhen(x, `beta's attempt ${attempt} decided`, (r) => r.status !== 'started' && r.attempts === attempt);
    f.clock.step(120_000);
  }
  await f.hangUp(beta);
  // attempt 3 on kiln's own worker, as if its server process died: the sweep re-queues it, spent for everyone
  const kiln = await f.kilnWorker();
  await f.take(kiln);
  await f.rowWhen(x, 'attempt 3 started', (r) => r.status === 'started' && r.attempts === 3);
  await f.kiln.sql`update worker_connections set disconnected_at = now() where disconnected_at is null and worker_id = (
    select db.worker_id from derivation_builds db join derivations d on d.id = db.derivation_id where d.drv_path = ${x.drvPath})`;
  await requeueOrphanedJobs(f.kiln.events.events);
  t.match(await f.row(x), { status: 'queued', attempts: 3, failed_for: null }, 'beta has spent 3 (two on its worker, the orphan), undecided');
  await f.hangUp(kiln);

  const acme = await f.acmeWorker();
  t.match(await f.failNext(acme, x, 'acme\'s failure is decided'), { status: 'queued', attempts: 4, failed_for: null },
    'retried: acme has spent 2 of 3, and acme\'s attempt does not count for beta, so it exhausts no one');
  t.same(await f.keptFailures(), [], 'acme\'s worker\'s failure is kept for no one');
});

t.test('a failure reported for an attempt the build has moved past changes nothing', async (t) => {
  const f = await twoTenants(t);
  const x = derivationNode('stale-failure');
  await f.evaluate(x, 'beta');
  const kiln = await f.kilnWorker();
  const first = await f.take(kiln);
  f.failTransiently(kiln, first.jobId);
  await f.rowWhen(x, 'attempt 1 decided', (r) => r.status === 'queued');
  f.clock.step(30_000);
  await f.take(kiln);
  await f.rowWhen(x, 'attempt 2 started', (r) => r.status === 'started' && r.attempts === 2);
  const [{ id } = { id: '' }] = await f.kiln.sql<{ id: string }[]>`
    select db.id from derivation_builds db join derivations d on d.id = db.derivation_id where d.drv_path = ${x.drvPath}`;
  const onError = (e: unknown) => t.fail(String(e));
  const events = f.kiln.events.events;
  const outcomes = new BuildOutcomes(f.kiln.sql, events, new EvaluationProgress(f.kiln.sql, events, onError),
    buildProgressReporter(f.kiln.sql, events, systemClock, onError), () => undefined, { maxAttempts: 2, retryBackoffSecs: 30, inputsUnavailableMaxLoops: 1, clock: f.clock });
  await outcomes.failed(id, 1, jobFailure('network', 'attempt 1, again'), {});
  t.match(await f.row(x), { status: 'started', attempts: 2, failed_for: null }, 'attempt 2 still runs');
  t.same(await f.kiln.sql`select attempt from derivation_build_scoped_attempts where derivation_build_id = ${id} order by attempt`, [{ attempt: 1 }],
    'and nothing is recorded for it');
});

t.test('an aborted build reached again starts over with all of its attempts: an abort is not a failure', async (t) => {
  const f = await twoTenants(t);
  const x = derivationNode('aborted-then-reached');
  await f.evaluate(x, 'beta');
  const kiln = await f.kilnWorker();
  const first = await f.take(kiln);
  f.failTransiently(kiln, first.jobId);
  await f.rowWhen(x, 'attempt 1 decided', (r) => r.status === 'queued' && r.attempts === 1);
  f.clock.step(30_000);
  await f.take(kiln);
  await f.rowWhen(x, 'attempt 2 started', (r) => r.status === 'started' && r.attempts === 2);
  const [evaluation] = await f.kiln.sql<{ id: string }[]>`
    select e.id from evaluations e join tasks t on t.id = e.task_id join projects p on p.id = t.project_id
    join organizations o on o.id = p.organization_id where o.name = 'beta'`;
  t.equal((await f.kiln.api('POST', `/evals/${evaluation!.id}`, { token: f.bobToken, body: { method: 'abort' } })).status, 200);
  await f.rowWhen(x, 'aborted', (r) => r.status === 'aborted');
  await f.evaluate(x, 'beta');
  await f.rowWhen(x, 'reached again', (r) => r.status === 'queued');
  // a new worker of kiln's own: the first still holds the cancelled job's slot
  const other = await f.kilnWorker();
  const third = await f.take(other);
  f.failTransiently(other, third.jobId);
  t.match(await f.rowWhen(x, 'attempt 3 decided', (r) => r.status !== 'started' && r.attempts === 3), { status: 'queued', failed_for: null },
    'its first failure since the abort: retried (build.maxAttempts 2), not failed');
});
