// What a scheduler pass does depends on what woke it (issue 23, dispatch throughput): a freed slot or
// a completion (the build cycle) places builds only, without the queued-evaluation queries; any
// other wake (a worker connecting, a recording, the periodic tick) runs the full pass. Real server,
// protocol-level worker (no Nix), the periodic pass held so that only the wakes themselves count.
import t from 'tap';
import type { SchedulerTicker } from '../../../services/index.js';
import { startTestKiln } from '../../support/kiln.js';
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

t.test('a pass woken by the build cycle places builds only; a full wake dispatches the evaluation it left', async (t) => {
  const kiln = await startTestKiln(t, { localWorker: true }, { schedulerTicker: heldTicker });
  const { token, projectId } = await subscribedProject(kiln);
  const worker = await handshake(`ws://127.0.0.1:${kiln.port}/proto`, testHello());
  t.teardown(() => worker.close());
  await worker.next('welcome');

  const dep = derivationNode('dep');
  const top = derivationNode('top', [dep.drvPath]);
  const evaluated = await kiln.api<string>('POST', `/tasks/${projectId}/default/evaluate`, { token, body: { commit: 'a'.repeat(40) } });
  t.equal(evaluated.status, 200, String(evaluated.message));
  const evalJob = await worker.next('evalJob');
  worker.send({ t: 'evalBatch', jobId: evalJob.jobId, derivations: [dep.derivation, top.derivation], attributes: [{ path: ['packages', 'x86_64-linux', 'top'], drvPath: top.drvPath, outputs: { out: top.out } }], errors: [] });
  worker.send({ t: 'evalResult', jobId: evalJob.jobId, commit: 'a'.repeat(40), derivationCount: 2, attributeCount: 1, errorCount: 0, durationMs: 1 });
  const first = await worker.next('buildJob');
  t.equal(first.drvPath, dep.drvPath);

  // A queued evaluation the scheduler was not told of (a row only the database knows; the worker's evaluation slot is free).
  const [other] = await kiln.sql<{ id: string }[]>`
    insert into evaluations (task_id, repository, commit, wildcard, created_by, trigger)
    select task_id, repository, ${'b'.repeat(40)}, wildcard, created_by, trigger from evaluations where id = ${evaluated.message} returning id`;
  const phase = async (id: string) => (await kiln.sql<{ phase: string }[]>`select phase from evaluations where id = ${id}`)[0]!.phase;

  // dep's completion readies top: passes woken by its freed slot and its completion dispatch top...
  succeed(worker, first.jobId, dep);
  const second = await worker.next('buildJob');
  t.equal(second.drvPath, top.drvPath, 'the completion\'s pass placed the build it made ready');
  succeed(worker, second.jobId, top);
  await eventually(() => phase(evaluated.message), { until: (p) => p === 'completed', timeout: 30_000, interval: 20, message: 'the first evaluation completes' });
  // ...and none of those passes looked for queued evaluations
  t.equal(await phase(other!.id), 'queued', 'the build cycle\'s passes left the queued evaluation alone');

  // A worker connecting is a full wake: the evaluation is dispatched.
  const late = await handshake(`ws://127.0.0.1:${kiln.port}/proto`, testHello({ capabilities: { eval: false, build: true, fetch: true, federate: false } }));
  t.teardown(() => late.close());
  await late.next('welcome');
  const job = await worker.next('evalJob');
  t.equal(job.commit, 'b'.repeat(40), 'the full pass dispatched it');
  t.not(await phase(other!.id), 'queued');
});
