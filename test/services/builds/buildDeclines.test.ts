// Declined builds (docs/builds.md, "Declined builds") on a real server whose clock moves only when the
// test steps it, with protocol-level workers (no Nix): a build a worker gives back (jobRefused after
// jobAccepted) is offered to that worker again only after a pause that doubles with each of its
// declines, up to 5 minutes; no decline spends one of build.maxAttempts or lengthens the retry
// backoff; another worker takes it at once; a give-back does not pause the worker for other builds,
// and a refusal of a job not taken still does. The row counts the declines, so forgetting the
// pauses spends no attempt; a give-back stores the log so far; the pauses kept in memory are bounded.
import t, { type Test } from 'tap';
import { jobFailure } from '../../../protocol/index.js';
import { startTestKiln } from '../../support/kiln.js';
import { subscribedProject } from '../../support/subscribedProject.js';
import { steppedClock } from '../../support/clock.js';
import { eventually } from '../../support/events.js';
import { handshake, testHello, type ProtoClient } from '../../support/protoClient.js';
import { derivationNode, type DerivationNodeFixture } from '../../support/derivationNodes.js';
import { BuildDeclines } from '../../../services/builds/buildDeclines.js';

type Row = { status: string; attempts: number; worker_id: string | null; not_before: Date | null };

async function farm(t: Test, builders: number, options: Record<string, unknown> = {}) {
  const clock = steppedClock(new Date());
  // the workers send no heartbeats, and the test steps the clock by minutes
  const kiln = await startTestKiln(t, { localWorker: true, 'proto.workerHeartbeatTimeoutSecs': 0, ...options }, { clock });
  const { token, projectId } = await subscribedProject(kiln);
  const url = `ws://127.0.0.1:${kiln.port}/proto`;
  const evaluator = await handshake(url, testHello({ capabilities: { eval: true, build: false, fetch: true, federate: false } }));
  t.teardown(() => evaluator.close());
  await evaluator.next('welcome');
  const workers: { client: ProtoClient; id: string }[] = [];
  for (let i = 0; i < builders; i += 1) {
    const hello = testHello({ capabilities: { eval: false, build: true, fetch: true, federate: false }, maxConcurrentBuilds: 1 });
    const client = await handshake(url, hello);
    t.teardown(() => client.close());
    await client.next('welcome');
    workers.push({ client, id: hello.workerId });
  }
  const evaluate = async (nodes: DerivationNodeFixture[]) => {
    await kiln.api('POST', `/tasks/${projectId}/default/evaluate`, { token, body: { commit: 'a'.repeat(40) } });
    const evalJob = await evaluator.next('evalJob');
    evaluator.send({ t: 'evalBatch', jobId: evalJob.jobId, derivations: nodes.map((n) => n.derivation),
      attributes: nodes.map((n, i) => ({ path: ['packages', 'x86_64-linux', `n${i}`], drvPath: n.drvPath, outputs: { out: n.out } })), errors: [] });
    evaluator.send({ t: 'evalResult', jobId: evalJob.jobId, commit: 'a'.repeat(40), derivationCount: nodes.length, attributeCount: nodes.length, errorCount: 0, durationMs: 1 });
  };
  const row = async (n: DerivationNodeFixture) => (await kiln.sql<Row[]>`
    select db.status, db.attempts, db.worker_id, db.not_before from derivation_builds db join derivations d on d.id = db.derivation_id
    where d.drv_path = ${n.drvPath}`)[0]!;
  const rowWhen = (n: DerivationNodeFixture, what: string, until: (r: Row) => boolean) => eventually(what, async () => {
    const [r] = await kiln.sql<Row[]>`
      select db.status, db.attempts, db.worker_id, db.not_before from derivation_builds db join derivations d on d.id = db.derivation_id
      where d.drv_path = ${n.drvPath}`;
    return r && until(r) ? r : undefined;
  });
  /** the worker takes the job, then gives it back (its store holds a path the job may not use) */
  const giveBack = (client: ProtoClient, jobId: string) => {
    client.send({ t: 'jobAccepted', jobId });
    client.send({ t: 'jobRefused', jobId, refusal: 'busy', message: 'a path the job may not use is held by another build' });
  };
  return { kiln, clock, workers, evaluator, projectId, token, evaluate, row, rowWhen, giveBack };
}

t.test('a worker\'s declines of a build: a doubling pause on that worker, capped, and no attempt spent', async (t) => {
  const { kiln, clock, workers: [a], evaluate, row, rowWhen, giveBack } = await farm(t, 1, { 'build.maxAttempts': 2 });
  const x = derivationNode('declined');
  await evaluate([x]);
  let job = await a!.client.next('buildJob');
  t.match(job.jobId, /:1$/);

  // 2 s, 4 s, … 256 s, then 300 s (the cap) from the 9th decline on
  const pauses = [2, 4, 8, 16, 32, 64, 128, 256, 300, 300].map((s) => s * 1000);
  for (const [i, pauseMs] of pauses.entries()) {
    const dispatch = i + 1;
    giveBack(a!.client, job.jobId);
    await rowWhen(x, `decline ${dispatch} re-queued`, (r) => r.status === 'queued' && r.attempts === dispatch);
    clock.step(pauseMs - 1);
    await kiln.scheduler.passNow();
    t.match(await row(x), { status: 'queued', attempts: dispatch }, `1 ms before its ${pauseMs / 1000} s pause is over, the decliner is not offered it again`);
    clock.step(1);
    await kiln.scheduler.passNow();
    t.match(await row(x), { status: 'started', attempts: dispatch + 1, worker_id: a!.id }, `offered again after decline ${dispatch}'s pause`);
    job = await a!.client.next('buildJob');
  }

  // 11 dispatches, 10 declined: the failure is the first attempt spent, retried after build.retryBackoffSecs (30 s), not 2^10 times it
  const failedAt = clock.now().getTime();
  a!.client.send({ t: 'jobFailed', jobId: job.jobId, failure: jobFailure('network', 'the network went away'), durationMs: 1, logBytes: 0, logDroppedBytes: 0 });
  const retried = await rowWhen(x, 'the first spent attempt is retried', (r) => r.status !== 'started');
  t.match(retried, { status: 'queued', attempts: 11 }, 'declines spend none of build.maxAttempts (2)');
  t.equal(retried.not_before?.getTime(), failedAt + 30_000, 'the retry waits for one spent attempt');
  clock.step(30_000);
  await kiln.scheduler.passNow();
  job = await a!.client.next('buildJob');
  a!.client.send({ t: 'jobFailed', jobId: job.jobId, failure: jobFailure('network', 'the network went away'), durationMs: 1, logBytes: 0, logDroppedBytes: 0 });
  t.match(await rowWhen(x, 'the second spent attempt is the last', (r) => r.status !== 'started'), { status: 'failed', attempts: 12 });
});

t.test('another worker takes a declined build at once', async (t) => {
  const { kiln, workers, evaluate, rowWhen, giveBack } = await farm(t, 2);
  const x = derivationNode('wanted');
  await evaluate([x]);
  const first = await rowWhen(x, 'dispatched', (r) => r.status === 'started');
  const decliner = workers.find((w) => w.id === first.worker_id)!;
  const other = workers.find((w) => w.id !== first.worker_id)!;
  giveBack(decliner.client, (await decliner.client.next('buildJob')).jobId);
  await rowWhen(x, 're-queued', (r) => r.status === 'queued');
  await kiln.scheduler.passNow();
  t.match(await rowWhen(x, 'dispatched again', (r) => r.status === 'started'), { attempts: 2, worker_id: other.id }, 'the other worker takes it without waiting');
  t.equal((await other.client.next('buildJob')).drvPath, x.drvPath);
});

t.test('a give-back does not pause the worker: it takes another build at once', async (t) => {
  const { kiln, workers: [a], evaluate, row, rowWhen, giveBack } = await farm(t, 1);
  const x = derivationNode('declined');
  const y = derivationNode('usable');
  await evaluate([x, y]);
  const job = await a!.client.next('buildJob');
  const [declined, usable] = job.drvPath === x.drvPath ? [x, y] : [y, x];
  giveBack(a!.client, job.jobId);
  await rowWhen(declined, 're-queued', (r) => r.status === 'queued');
  await kiln.scheduler.passNow();
  t.match(await row(usable), { status: 'started', worker_id: a!.id }, 'the other build goes to the decliner without waiting');
  t.match(await row(declined), { status: 'queued', attempts: 1 }, 'the declined one waits for its pause');
  t.equal((await a!.client.next('buildJob')).drvPath, usable.drvPath);
});

t.test('a refusal of a job not taken pauses the worker for 2 s', async (t) => {
  const { kiln, clock, workers: [a], evaluate, row, rowWhen } = await farm(t, 1);
  const x = derivationNode('refused');
  const y = derivationNode('waiting');
  await evaluate([x, y]);
  const job = await a!.client.next('buildJob');
  const [refused, waiting] = job.drvPath === x.drvPath ? [x, y] : [y, x];
  a!.client.send({ t: 'jobRefused', jobId: job.jobId, refusal: 'busy', message: 'no room' });
  await rowWhen(refused, 're-queued', (r) => r.status === 'queued');
  await kiln.scheduler.passNow();
  t.match(await row(waiting), { status: 'queued', attempts: 0 }, 'the worker gets no other build during its pause');
  clock.step(2000);
  await kiln.scheduler.passNow();
  t.ok([x.drvPath, y.drvPath].includes((await a!.client.next('buildJob')).drvPath), 'after 2 s it gets a build again');
});

t.test('declines are counted on the row: forgetting the pauses (a restart, a flood of other declines) spends no attempt', async (t) => {
  const { kiln, clock, workers: [a], evaluate, rowWhen, giveBack } = await farm(t, 1, { 'build.maxAttempts': 2 });
  const x = derivationNode('remembered');
  await evaluate([x]);
  let job = await a!.client.next('buildJob');
  for (const dispatch of [1, 2]) {
    giveBack(a!.client, job.jobId);
    await rowWhen(x, `decline ${dispatch} re-queued`, (r) => r.status === 'queued' && r.attempts === dispatch);
    clock.step(300_000);
    await kiln.scheduler.passNow();
    job = await a!.client.next('buildJob');
  }
  const [counted] = await kiln.sql<{ id: string; declines: number }[]>`
    select db.id, db.declines from derivation_builds db join derivations d on d.id = db.derivation_id where d.drv_path = ${x.drvPath}`;
  t.equal(counted!.declines, 2, 'both declines are on the row');
  // what the process holds in memory goes (as at a restart, or pushed out by another organization's 50,000 declines)
  (kiln.scheduler as unknown as { placement: { declines: BuildDeclines } }).placement.declines.forget(counted!.id);
  a!.client.send({ t: 'jobFailed', jobId: job.jobId, failure: jobFailure('network', 'the network went away'), durationMs: 1, logBytes: 0, logDroppedBytes: 0 });
  t.match(await rowWhen(x, 'the failure is decided', (r) => r.status !== 'started'), { status: 'queued', attempts: 3 }, 'dispatch 3 is the first attempt spent: retried, not failed');
});

t.test('a give-back stores what the build logged before it', async (t) => {
  const { kiln, workers: [a], evaluate, rowWhen } = await farm(t, 1);
  const x = derivationNode('logged');
  await evaluate([x]);
  const job = await a!.client.next('buildJob');
  a!.client.send({ t: 'jobAccepted', jobId: job.jobId });
  a!.client.send({ t: 'buildLog', jobId: job.jobId, seq: 0, data: Buffer.from('unpacking sources\n'), droppedBytes: 0 });
  a!.client.send({ t: 'jobRefused', jobId: job.jobId, refusal: 'busy', message: 'a path the job may not use is held by another build' });
  await rowWhen(x, 're-queued', (r) => r.status === 'queued');
  const chunks = await eventually('the log stored', async () => {
    const rows = await kiln.sql<{ data: Buffer }[]>`
      select c.data from build_log_chunks c join derivation_builds db on db.id = c.derivation_build_id join derivations d on d.id = db.derivation_id
      where d.drv_path = ${x.drvPath} and c.attempt = 1`;
    return rows.length > 0 ? rows : undefined;
  });
  t.equal(Buffer.concat(chunks.map((c) => c.data)).toString(), 'unpacking sources\n');
});

t.test('a build\'s pauses are bounded: at most 16 workers each, the least recent forgotten first', async (t) => {
  const clock = steppedClock(new Date());
  const declines = new BuildDeclines(clock);
  for (let i = 0; i < 17; i += 1) declines.declined('b', `w${i}`);
  const paused = declines.pausedFor('b')!;
  t.equal(paused('w0'), false, 'the first of 17 decliners is forgotten');
  t.equal(paused('w1'), true);
  t.equal(paused('w16'), true);
  t.equal(declines.declined('b', 'w16').count, 2, 'a worker\'s count goes on');
  // w0 was forgotten with one decline: a worker not kept counts on from there, so a build with more
  // decliners than the bound does not go round them at the first delay
  t.same(declines.declined('b', 'w0'), { count: 2, pauseMs: 4000 }, 'a forgotten worker starts from the most declines forgotten');
  for (let round = 0; round < 3; round += 1) for (let i = 0; i < 17; i += 1) declines.declined('b', `w${i}`);
  t.ok(declines.declined('b', 'w99').pauseMs >= 16_000, 'after rounds over 17 workers, a new decliner waits as long as they did');
  declines.forget('b');
  t.equal(declines.pausedFor('b'), null, 'a completed build is forgotten');
});

t.test('an evaluation job refused after it was taken still pauses the worker for 2 s (only a build\'s give-back does not)', async (t) => {
  const { kiln, clock, evaluator, projectId, token } = await farm(t, 0);
  await kiln.api('POST', `/tasks/${projectId}/default/evaluate`, { token, body: { commit: 'a'.repeat(40) } });
  const job = await evaluator.next('evalJob');
  evaluator.send({ t: 'jobAccepted', jobId: job.jobId });
  evaluator.send({ t: 'jobRefused', jobId: job.jobId, refusal: 'busy', message: 'no room' });
  const phase = async () => (await kiln.sql<{ phase: string }[]>`select phase from evaluations`)[0]!.phase;
  await eventually('re-queued', async () => (await phase()) === 'queued' || undefined);
  await kiln.scheduler.passNow();
  t.equal(await phase(), 'queued', 'the worker gets no job during its pause');
  clock.step(2000);
  await kiln.scheduler.passNow();
  t.not(await phase(), 'queued', 'after 2 s it gets the evaluation again');
});

t.test('a full ready window no worker takes does not keep a newer build out (the read pages past it)', async (t) => {
  const { kiln, workers: [a], evaluate, row, rowWhen } = await farm(t, 1);
  // 500 builds (a pass's window) for a system no connected worker has, and a newer one it can build
  const stuck = Array.from({ length: 500 }, (_, i) => {
    const n = derivationNode(`stuck-${i}`);
    return { ...n, derivation: { ...n.derivation, system: 'aarch64-linux' } };
  });
  // recorded unbuildable too, so no pass dispatches it before it is made the newest and buildable
  const plain = derivationNode('newer');
  const newer = { ...plain, derivation: { ...plain.derivation, system: 'aarch64-linux' } };
  await evaluate([...stuck, newer]);
  await rowWhen(newer, 'recorded', (r) => r.status === 'queued');
  await kiln.sql`update derivations set system = 'x86_64-linux' where drv_path = ${newer.drvPath}`;
  await kiln.sql`update derivation_builds db set queued_at = now() + interval '1 hour' from derivations d where d.id = db.derivation_id and d.drv_path = ${newer.drvPath}`;
  await eventually('the evaluation is building', async () =>
    (await kiln.sql`select 1 from evaluations where phase = 'building'`).length > 0 || undefined);
  // whichever window the last read left off at: two passes reach the newer build
  await kiln.scheduler.passNow();
  await kiln.scheduler.passNow();
  t.match(await row(newer), { status: 'started', worker_id: a!.id }, 'the pass after one that placed nothing from the full window reads past it');
});
