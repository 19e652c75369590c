// What a scheduler pass does depends on what woke it (issue 23, dispatch throughput): a freed slot or
// a completion (the build cycle) places builds only, without the queued-evaluation queries and with
// the projects' caches read before; any other wake (a worker connecting, a recording, the periodic
// tick) runs the full pass, which reads them again and runs the restore pass. Real server,
// protocol-level worker (no Nix), the periodic pass held so that only the wakes themselves count.
import t from 'tap';
import type { SchedulerTicker } from '../../../services/index.js';
import { startTestKiln } from '../../support/kiln.js';
import { createTestCache } from '../../support/caches.js';
import { subscribedProject } from '../../support/subscribedProject.js';
import { handshake, testHello, type ProtoClient } from '../../support/protoClient.js';
import { derivationNode, narHash, type DerivationNodeFixture } from '../../support/derivationNodes.js';
import { eventually } from '../../support/eventually.js';

/** A periodic pass that never comes: only the events themselves wake the scheduler. */
const heldTicker: SchedulerTicker = { start: () => () => undefined };

const succeed = (worker: ProtoClient, jobId: string, n: DerivationNodeFixture) => worker.send({
  t: 'buildResult', jobId, drvPath: n.drvPath, alreadyValid: false, durationMs: 1, logBytes: 0, logDroppedBytes: 0,
  outputs: [{ name: 'out', path: n.out, narHash: narHash(), narSize: 100, references: [], deriver: n.drvPath, ca: null }],
});

t.test('a pass woken by the build cycle places builds only; a full wake dispatches the evaluation it left and reads the caches again', async (t) => {
  const kiln = await startTestKiln(t, { localWorker: true }, { schedulerTicker: heldTicker });
  const { token, projectId } = await subscribedProject(kiln);
  const worker = await handshake(`ws://127.0.0.1:${kiln.port}/proto`, testHello());
  t.teardown(() => worker.close());
  await worker.next('welcome');

  const dep = derivationNode('dep');
  const top = derivationNode('top', [dep.drvPath]);
  const last = derivationNode('last', [top.drvPath]);
  const attribute = (name: string, n: DerivationNodeFixture) => ({ path: ['packages', 'x86_64-linux', name], drvPath: n.drvPath, outputs: { out: n.out } });
  const evaluated = await kiln.api<string>('POST', `/tasks/${projectId}/default/evaluate`, { token, body: { commit: 'a'.repeat(40) } });
  t.equal(evaluated.status, 200, String(evaluated.message));
  const evalJob = await worker.next('evalJob');
  worker.send({ t: 'evalBatch', jobId: evalJob.jobId, derivations: [dep.derivation, top.derivation, last.derivation], attributes: [attribute('last', last)], errors: [] });
  worker.send({ t: 'evalResult', jobId: evalJob.jobId, commit: 'a'.repeat(40), derivationCount: 3, attributeCount: 1, errorCount: 0, durationMs: 1 });
  const first = await worker.next('buildJob');
  t.equal(first.drvPath, dep.drvPath);
  t.same(first.targetCaches, ['main']);

  // What only the database knows, the scheduler untold: a queued evaluation (the worker's evaluation
  // slot is free) and a second cache the project now pushes to.
  const [other] = await kiln.sql<{ id: string }[]>`
    insert into evaluations (task_id, repository, commit, wildcard, created_by, trigger)
    select task_id, repository, ${'b'.repeat(40)}, wildcard, created_by, trigger from evaluations where id = ${evaluated.message} returning id`;
  const extra = await createTestCache(kiln.sql, 'extra');
  await kiln.sql`insert into subscriptions (project_id, cache_id, mode) values (${projectId}, ${extra.id}, 0)`;
  const phase = async (id: string) => (await kiln.sql<{ phase: string }[]>`select phase from evaluations where id = ${id}`)[0]!.phase;

  // Each completion readies the next build: the passes its freed slot and its commit woke dispatch it...
  succeed(worker, first.jobId, dep);
  const second = await worker.next('buildJob');
  t.equal(second.drvPath, top.drvPath, 'the completion\'s pass placed the build it made ready');
  // A build queued again for another tenant that no evaluation wants any more (tenantScope.ts): the
  // restore pass's candidate, which only a full pass reads (the earlier full passes have ended here).
  const [abandoned] = await kiln.sql<{ id: string }[]>`
    with d as (insert into derivations (drv_path, name, system, outputs) values (${`/nix/store/${'r'.repeat(32)}-abandoned.drv`}, 'abandoned', 'x86_64-linux', '{}') returning id)
    insert into derivation_builds (derivation_id, status, done_for)
    select d.id, 'queued', array[p.organization_id] from d, projects p where p.id = ${projectId} returning id`;
  const statusOf = async (id: string) => (await kiln.sql<{ status: string }[]>`select status from derivation_builds where id = ${id}`)[0]!.status;
  succeed(worker, second.jobId, top);
  const third = await worker.next('buildJob');
  t.equal(third.drvPath, last.drvPath);
  t.same([second.targetCaches, third.targetCaches], [['main'], ['main']], 'with the caches read before');
  succeed(worker, third.jobId, last);
  await eventually(() => phase(evaluated.message), { until: (p) => p === 'completed', timeout: 30_000, interval: 20, message: 'the first evaluation completes' });
  // ...and none of those passes looked for queued evaluations
  t.equal(await phase(other!.id), 'queued', 'the build cycle\'s passes left the queued evaluation alone');
  t.equal(await statusOf(abandoned!.id), 'queued', 'and did not run the restore pass');

  // A worker connecting is a full wake: the evaluation is dispatched, and its build goes to both caches.
  const late = await handshake(`ws://127.0.0.1:${kiln.port}/proto`, testHello({ capabilities: { eval: false, build: true, fetch: true, federate: false } }));
  t.teardown(() => late.close());
  await late.next('welcome');
  const job = await worker.next('evalJob');
  t.equal(job.commit, 'b'.repeat(40), 'the full pass dispatched it');
  await eventually(() => statusOf(abandoned!.id), { until: (s) => s === 'completed', timeout: 10_000, interval: 20, message: 'the full pass restored the abandoned build' });
  const after = derivationNode('after');
  worker.send({ t: 'evalBatch', jobId: job.jobId, derivations: [after.derivation], attributes: [attribute('after', after)], errors: [] });
  worker.send({ t: 'evalResult', jobId: job.jobId, commit: 'b'.repeat(40), derivationCount: 1, attributeCount: 1, errorCount: 0, durationMs: 1 });
  const jobs = [worker.next('buildJob'), late.next('buildJob')];
  for (const waiting of jobs) waiting.catch(() => undefined); // the one that gets no job rejects when its socket closes
  const fresh = await Promise.race(jobs);
  t.equal(fresh.drvPath, after.drvPath);
  t.same([...fresh.targetCaches].sort(), ['extra', 'main'], 'a full pass read the caches again');
});
