// Cluster jobs' timeouts (issue 23 item 6; docs/builds.md, "Cluster jobs") on the real server and database
// with protocol-level workers (no Nix) and a clock that moves only when the test steps it: a
// `cluster-N` build is placed on N idle workers of one zone, members get the roster with their
// endpoints, a build that waited scheduler.clusterReserveAfterSecs reserves workers (which take no
// single job), a reservation expires after clusterReserveTimeoutSecs, and an attempt whose members
// do not all accept within clusterPrepareTimeoutSecs aborts and the build goes back to the queue.
import t from 'tap';
import { eventually } from '../../support/eventually.js';
import { derivationNode } from '../../support/derivationNodes.js';
import { clusterFarm as farm, clusterNode } from '../../support/clusterFarm.js';
import { insertClusterJob } from '../../../services/builds/clusterJobRows.js';


/** Two workers, each busy with a single build, then a `cluster-2` build evaluated: it cannot be placed. */
async function busyFarm(t: Parameters<typeof farm>[0], name: string) {
  const f = await farm(t, [{ zone: null }, { zone: null }]);
  const busy = [derivationNode(`busy-${name}-a`), derivationNode(`busy-${name}-b`)];
  await f.evaluate(busy);
  const running = await Promise.all(f.members.map(async (m) => ({ m, job: await m.client.next('buildJob') })));
  const job = clusterNode(name, 2);
  await f.evaluate([job]);
  return { f, busy, running, job };
}

t.test('after scheduler.clusterReserveAfterSecs the job reserves workers, which take no single job; the reservation expires', async (t) => {
  const { f, busy, running, job } = await busyFarm(t, 'needs-two');
  t.same(await f.rows(), [], 'no two idle workers: it waits');

  f.clock.step(599_000);
  await f.kiln.scheduler.passNow();
  t.same(await f.rows(), [], 'no reservation before 600 s (the default)');
  f.clock.step(1_000);
  await f.kiln.scheduler.passNow();
  const reserved = await f.rowIn('reserved', 'reserved after 600 s');
  t.same([...reserved.members].sort(), f.members.map((m) => m.id).sort());

  // the first worker finishes: idle, but reserved
  const [first, second] = running;
  f.succeed(first!.m.client, first!.job.jobId, busy.find((n) => n.drvPath === first!.job.drvPath)!);
  await eventually(() => f.status(busy.find((n) => n.drvPath === first!.job.drvPath)!), { until: (s) => s === 'completed', interval: 20, message: 'done' });
  const single = derivationNode('single');
  await f.evaluate([single]);
  await f.kiln.scheduler.passNow();
  t.equal(await f.status(single), 'queued', 'a reserved idle worker takes no single job');

  // 1800 s (the default): the reservation expires, the waiting single build goes to the idle worker
  f.clock.step(1_800_000);
  await f.kiln.scheduler.passNow();
  const expired = await f.rowIn('expired', 'the reservation expired');
  t.match(expired.reason, /clusterReserveTimeoutSecs/);
  const singleJob = await first!.m.client.next('buildJob');
  t.equal(singleJob.drvPath, single.drvPath, 'the released worker takes the single build');
  t.equal(await f.status(job), 'queued');
  t.ok(second, 'the second worker still builds');
});

t.test('a reservation whose build is aborted ends at the next pass and frees its workers', async (t) => {
  const { f, busy, running, job } = await busyFarm(t, 'aborted-while-reserved');
  await f.kiln.scheduler.passNow();
  f.clock.step(600_000);
  await f.kiln.scheduler.passNow();
  await f.rowIn('reserved', 'reserved after 600 s');

  const aborted = await f.kiln.api('POST', `/builds/${await f.buildOf(job)}`, { token: f.token, body: { method: 'abort' } });
  t.equal(aborted.status, 200, `the build is aborted: ${JSON.stringify(aborted.message)}`);
  await f.kiln.scheduler.passNow();
  const expired = await f.rowIn('expired', 'the reservation ended');
  t.match(expired.reason, /no longer queued/);

  // long before clusterReserveTimeoutSecs, a worker that finishes takes the next single build
  const [first] = running;
  f.succeed(first!.m.client, first!.job.jobId, busy.find((n) => n.drvPath === first!.job.drvPath)!);
  await eventually(() => f.status(busy.find((n) => n.drvPath === first!.job.drvPath)!), { until: (s) => s === 'completed', interval: 20, message: 'done' });
  const single = derivationNode('single-after-abort');
  await f.evaluate([single]);
  t.equal((await first!.m.client.next('buildJob')).drvPath, single.drvPath, 'the released worker takes a single build');
});

t.test('members that do not accept within scheduler.clusterPrepareTimeoutSecs abort the attempt; the build goes back to the queue', async (t) => {
  const f = await farm(t, [{ zone: null }, { zone: null }]);
  const job = clusterNode('slow-members', 2);
  await f.evaluate([job]);
  const first = await f.rowIn('preparing', 'the first attempt');
  const firstJob = await f.member(first.members[1]!).client.next('buildJob');

  // rank 1 stays silent for 30 s (the default)
  f.clock.step(29_000);
  await f.kiln.scheduler.passNow();
  t.equal((await f.rows()).find((r) => r.id === first.id)?.state, 'preparing', 'not yet at 29 s');
  f.clock.step(1_000);
  await f.kiln.scheduler.passNow();
  const aborted = (await f.rows()).find((r) => r.id === first.id)!;
  t.equal(aborted.state, 'aborted');
  t.match(aborted.reason, /member\(s\) 1 did not accept within scheduler\.clusterPrepareTimeoutSecs/);
  t.equal((await f.member(first.members[1]!).client.next('cancelJob')).jobId, firstJob.jobId, 'the silent member is told to stop');
  t.equal(await f.status(job), 'queued', 'the build is still queued');

  // the next attempt: rank 1 accepts, rank 0 gets the started build and stays silent
  const second = await eventually(async () => (await f.rows()).find((r) => r.state === 'preparing' && r.id !== first.id), { interval: 20, message: 'a second attempt' });
  const rank1 = f.member(second.members[1]!);
  const rank0 = f.member(second.members[0]!);
  const memberJob = await rank1.client.next('buildJob');
  rank1.client.send({ t: 'jobAccepted', jobId: memberJob.jobId });
  const buildJob = await rank0.client.next('buildJob');
  t.equal(await f.status(job), 'started');
  f.clock.step(30_000);
  await f.kiln.scheduler.passNow();
  t.match((await f.rows()).find((r) => r.id === second.id), { state: 'aborted', reason: /member\(s\) 0 did not accept/ }, 'rank 0 did not accept in time');
  t.equal((await rank0.client.next('cancelJob')).jobId, buildJob.jobId, 'rank 0 is told to stop the build');
  t.equal((await rank1.client.next('cancelJob')).jobId, memberJob.jobId, 'rank 1 is released');
  await eventually(() => f.status(job), { until: (s) => s === 'queued', interval: 20, message: 'the started build went back to the queue' });

  // one active attempt per build: a second process's insert finds the conflict
  const third = await eventually(async () => (await f.rows()).find((r) => r.state === 'preparing'), { interval: 20, message: 'a third attempt' });
  const [active] = await f.kiln.sql<{ derivation_build_id: string }[]>`select derivation_build_id from cluster_jobs where id = ${third.id}`;
  t.notOk(await insertClusterJob(f.kiln.sql, { id: crypto.randomUUID(), derivationBuildId: active!.derivation_build_id, state: 'preparing', zone: null, members: third.members, deadline: new Date() }, new Date()),
    'another process cannot place the same build while an attempt is active');
});
