// A lost dispatch (docs/builds.md, "Lost dispatches"), on a real server with protocol-level workers
// (no Nix) and a clock the test steps: a worker that takes a build and disconnects before it began
// there spends none of the build's attempts; one whose build had begun (a log arrived) spends one.
import { randomUUID } from 'node:crypto';
import t, { type Test } from 'tap';
import { jobFailure } from '../../../protocol/index.js';
import { startTestKiln } from '../../support/kiln.js';
import { subscribedProject } from '../../support/subscribedProject.js';
import { steppedClock } from '../../support/clock.js';
import { eventually } from '../../support/events.js';
import { quietFor } from '../../support/eventually.js';
import { handshake, testHello, type ProtoClient } from '../../support/protoClient.js';
import { derivationNode, type DerivationNodeFixture } from '../../support/derivationNodes.js';

type Row = { status: string; attempts: number; declines: number };

async function farm(t: Test, maxAttempts = 2) {
  const clock = steppedClock(new Date());
  const kiln = await startTestKiln(t, { localWorker: true, 'proto.workerHeartbeatTimeoutSecs': 0, 'build.maxAttempts': maxAttempts }, { clock });
  const { token, projectId } = await subscribedProject(kiln);
  const url = `ws://127.0.0.1:${kiln.port}/proto`;
  const evaluator = await handshake(url, testHello({ capabilities: { eval: true, build: false, fetch: true, federate: false } }));
  t.teardown(() => evaluator.close());
  await evaluator.next('welcome');
  const builder = async (workerId: string = randomUUID()): Promise<ProtoClient> => {
    const client = await handshake(url, testHello({ workerId, capabilities: { eval: false, build: true, fetch: true, federate: false }, maxConcurrentBuilds: 1 }));
    t.teardown(() => client.close());
    await client.next('welcome');
    return client;
  };
  const evaluate = async (n: DerivationNodeFixture, commit = 'a'.repeat(40)) => {
    await kiln.api('POST', `/tasks/${projectId}/default/evaluate`, { token, body: { commit } });
    const evalJob = await evaluator.next('evalJob');
    evaluator.send({ t: 'evalBatch', jobId: evalJob.jobId, derivations: [n.derivation],
      attributes: [{ path: ['packages', 'x86_64-linux', 'n'], drvPath: n.drvPath, outputs: { out: n.out } }], errors: [] });
    evaluator.send({ t: 'evalResult', jobId: evalJob.jobId, commit, derivationCount: 1, attributeCount: 1, errorCount: 0, durationMs: 1 });
  };
  const rowWhen = (n: DerivationNodeFixture, what: string, until: (r: Row) => boolean) => eventually(what, async () => {
    const [r] = await kiln.sql<Row[]>`
      select db.status, db.attempts, db.declines from derivation_builds db join derivations d on d.id = db.derivation_id
      where d.drv_path = ${n.drvPath}`;
    return r && until(r) ? r : undefined;
  });
  /** the worker's first job is lost: it takes the job (and logs from it when `begin`), then its connection ends */
  const loseFirst = async (n: DerivationNodeFixture, begin: boolean, workerId?: string) => {
    const lost = await builder(workerId);
    await evaluate(n);
    const job = await lost.next('buildJob');
    lost.send({ t: 'jobAccepted', jobId: job.jobId });
    if (begin) lost.send({ t: 'buildLog', jobId: job.jobId, seq: 0, data: Buffer.from('building\n'), droppedBytes: 0 });
    await rowWhen(n, 'the worker took it', (r) => r.status === 'started');
    // one connection, in order: the server has read the log before it sees the close
    lost.close();
    await lost.closed;
    return rowWhen(n, 're-queued after the loss', (r) => r.status === 'queued');
  };
  /** another worker takes the build again, and it fails transiently there */
  const failOnAnother = async (n: DerivationNodeFixture) => {
    const other = await builder();
    await kiln.scheduler.passNow();
    const job = await other.next('buildJob');
    other.send({ t: 'jobAccepted', jobId: job.jobId });
    other.send({ t: 'jobFailed', jobId: job.jobId, failure: jobFailure('network', 'the network went away'), durationMs: 1, logBytes: 0, logDroppedBytes: 0 });
    return rowWhen(n, 'the failure is decided', (r) => r.status !== 'started');
  };
  return { loseFirst, failOnAnother, builder, kiln, clock, evaluate, rowWhen, token };
}

t.test('a worker lost before the build began there spends none of its attempts', async (t) => {
  const { loseFirst, failOnAnother } = await farm(t);
  const x = derivationNode('lost-before-it-began');
  t.match(await loseFirst(x, false), { attempts: 1, declines: 1 }, 'the lost dispatch is counted with those that spent no attempt');
  t.match(await failOnAnother(x), { status: 'queued', attempts: 2 }, 'dispatch 2 is the first attempt spent: retried, not failed (build.maxAttempts 2)');
});

t.test('a worker lost while the build ran there spends the attempt (the build may have taken it down)', async (t) => {
  const { loseFirst, failOnAnother } = await farm(t);
  const x = derivationNode('lost-while-it-ran');
  t.match(await loseFirst(x, true), { attempts: 1, declines: 0 });
  t.match(await failOnAnother(x), { status: 'failed', attempts: 2 }, 'the second attempt spent is the last of build.maxAttempts 2');
});

t.test('the lost worker is not given the build again at once: the loss pauses it there, as a decline does', async (t) => {
  const { loseFirst, builder, kiln, clock } = await farm(t);
  const x = derivationNode('lost-and-back');
  const workerId = randomUUID();
  await loseFirst(x, false, workerId);
  const back = await builder(workerId);
  await kiln.scheduler.passNow();
  let offered = false;
  void back.next('buildJob').then(() => (offered = true), () => undefined);
  await quietFor(500);
  t.notOk(offered, 'reconnected at once: not offered the build it lost');
  clock.step(3_000);
  await kiln.scheduler.passNow();
  await eventually('offered again after the pause', async () => offered || undefined);
  t.pass('after the 2 s pause it is offered again');
});

t.test('a build lost on each of its build.maxAttempts fails: one that takes every worker down does not go round for ever', async (t) => {
  const { loseFirst, builder, kiln } = await farm(t);
  const x = derivationNode('takes-its-workers-down');
  t.match(await loseFirst(x, true), { status: 'queued', attempts: 1, declines: 0 }, 'the first loss while it ran: queued again');
  const again = await builder();
  await kiln.scheduler.passNow();
  const job = await again.next('buildJob');
  again.send({ t: 'jobAccepted', jobId: job.jobId });
  again.send({ t: 'buildLog', jobId: job.jobId, seq: 0, data: Buffer.from('building\n'), droppedBytes: 0 });
  again.close();
  await again.closed;
  const row = await eventually('the second loss is decided', async () => {
    const [r] = await kiln.sql<{ status: string; attempts: number; failure_reason: string | null; failure_message: string | null }[]>`
      select db.status, db.attempts, db.failure_reason, db.failure_message from derivation_builds db
      join derivations d on d.id = db.derivation_id where d.drv_path = ${x.drvPath}`;
    return r && r.status !== 'started' ? r : undefined;
  });
  t.match(row, { status: 'failed', attempts: 2, failure_reason: 'worker_lost' }, 'the second loss is the last of build.maxAttempts 2: failed');
  t.match(row.failure_message, /connection ended while it built/, 'the message says why');
});

t.test('the loss of a cancelled job changes nothing: its build may run for another evaluation by then (review r5a-1)', async (t) => {
  // build.maxAttempts 1: a loss of the build's running attempt would fail it
  const { builder, kiln, evaluate, rowWhen, token } = await farm(t, 1);
  const x = derivationNode('cancelled-then-lost');
  const firstId = randomUUID();
  const first = await builder(firstId);
  await evaluate(x);
  const job = await first.next('buildJob');
  first.send({ t: 'jobAccepted', jobId: job.jobId });
  first.send({ t: 'buildLog', jobId: job.jobId, seq: 0, data: Buffer.from('building\n'), droppedBytes: 0 });
  await rowWhen(x, 'the first worker took it', (r) => r.status === 'started');
  const [evaluation] = await kiln.sql<{ id: string }[]>`select id from evaluations order by created_at desc limit 1`;
  t.equal((await kiln.api('POST', `/evals/${evaluation!.id}`, { token, body: { method: 'abort' } })).status, 200);
  t.equal((await first.next('cancelJob')).jobId, job.jobId, 'the first worker is told to stop (it does not answer)');
  // another evaluation wants it again, and another worker builds it
  await evaluate(x, 'b'.repeat(40));
  const second = await builder();
  await kiln.scheduler.passNow();
  const again = await second.next('buildJob');
  second.send({ t: 'jobAccepted', jobId: again.jobId });
  second.send({ t: 'buildLog', jobId: again.jobId, seq: 0, data: Buffer.from('building\n'), droppedBytes: 0 });
  await rowWhen(x, 'the second worker took it', (r) => r.status === 'started' && r.attempts === 2);
  first.close();
  await first.closed;
  await eventually('the server saw the first worker go', async () => {
    const [w] = await kiln.sql<{ gone: boolean }[]>`select disconnected_at is not null as gone from worker_connections where worker_id = ${firstId}`;
    return w?.gone === true ? true : undefined;
  });
  await quietFor(1_000);
  const row = await rowWhen(x, 'read', () => true);
  t.match(row, { status: 'started', attempts: 2 }, 'the second worker\'s attempt still runs: not failed, not re-queued');
});
