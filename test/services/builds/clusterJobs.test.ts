// Cluster jobs (issue 23 item 6; docs/builds.md, "Cluster jobs") on the real server and database
// with protocol-level workers (no Nix) and a clock that moves only when the test steps it: a
// `cluster-N` build is placed on N idle workers of one zone, members get the roster with their
// endpoints, a build that waited scheduler.clusterReserveAfterSecs reserves workers (which take no
// single job), a reservation expires after clusterReserveTimeoutSecs, and an attempt whose members
// do not all accept within clusterPrepareTimeoutSecs aborts and the build goes back to the queue.
import t from 'tap';
import type { Test } from 'tap';
import { startTestKiln } from '../../support/kiln.js';
import { subscribedProject } from '../../support/subscribedProject.js';
import { steppedClock } from '../../support/clock.js';
import { eventually } from '../../support/eventually.js';
import { handshake, testHello, type ProtoClient } from '../../support/protoClient.js';
import { derivationNode, narHash, type DerivationNodeFixture } from '../../support/derivationNodes.js';
import { insertClusterJob } from '../../../services/builds/clusterJobRows.js';

type Node = DerivationNodeFixture;
type Member = { client: ProtoClient; id: string; endpoint: string | null };
type Row = { id: string; state: string; zone: string | null; members: string[]; reason: string | null };

const clusterNode = (name: string, size: number, extra: string[] = []): Node => {
  const node = derivationNode(name);
  node.derivation.requiredSystemFeatures = [`cluster-${size}`, ...extra] as never[];
  return node;
};

async function farm(t: Test, workers: { zone: string | null; endpoint?: string; slots?: number }[]) {
  const clock = steppedClock(new Date());
  const kiln = await startTestKiln(t, { localWorker: true, 'build.retryBackoffSecs': 0 }, { clock });
  const { token, projectId } = await subscribedProject(kiln);
  const url = `ws://127.0.0.1:${kiln.port}/proto`;
  const evaluator = await handshake(url, testHello({ capabilities: { eval: true, build: false, fetch: true, federate: false } }));
  t.teardown(() => evaluator.close());
  await evaluator.next('welcome');
  const members: Member[] = [];
  for (const w of workers) {
    const hello = testHello({ capabilities: { eval: false, build: true, fetch: true, federate: false }, zone: w.zone, maxConcurrentBuilds: w.slots ?? 1,
      ...(w.endpoint ? { endpoint: w.endpoint } : {}) });
    const client = await handshake(url, hello);
    t.teardown(() => client.close());
    await client.next('welcome');
    members.push({ client, id: hello.workerId, endpoint: w.endpoint ?? null });
  }
  const evaluate = async (nodes: Node[]) => {
    const evaluated = await kiln.api<string>('POST', `/tasks/${projectId}/default/evaluate`, { token, body: { commit: 'a'.repeat(40) } });
    const evalJob = await evaluator.next('evalJob');
    evaluator.send({ t: 'evalBatch', jobId: evalJob.jobId, derivations: nodes.map((n) => n.derivation),
      attributes: nodes.map((n, i) => ({ path: ['packages', 'x86_64-linux', `n${i}`], drvPath: n.drvPath, outputs: { out: n.out } })), errors: [] });
    evaluator.send({ t: 'evalResult', jobId: evalJob.jobId, commit: 'a'.repeat(40), derivationCount: nodes.length, attributeCount: nodes.length, errorCount: 0, durationMs: 1 });
    await eventually(async () => (await kiln.api<{ phase: string }>('GET', `/evals/${evaluated.message}`, { token })).message,
      { until: (e) => e.phase !== 'queued' && e.phase !== 'evaluating', interval: 20, message: 'the evaluation is building' });
    await kiln.scheduler.passNow();
  };
  const succeed = (client: ProtoClient, jobId: string, n: Node) => client.send({
    t: 'buildResult', jobId, drvPath: n.drvPath, alreadyValid: false, durationMs: 1, logBytes: 0, logDroppedBytes: 0,
    outputs: [{ name: 'out', path: n.out, narHash: narHash(), narSize: 100, references: [], deriver: n.drvPath, ca: null }],
  });
  const status = async (n: Node) => (await kiln.sql<{ status: string }[]>`
    select db.status from derivation_builds db join derivations d on d.id = db.derivation_id where d.drv_path = ${n.drvPath}`)[0]?.status;
  const rows = () => kiln.sql<Row[]>`select id, state, zone, members::text[] as members, reason from cluster_jobs order by created_at, state`;
  const rowIn = (state: string, message: string) => eventually(async () => (await rows()).find((r) => r.state === state), { interval: 20, message });
  const member = (id: string) => members.find((m) => m.id === id)!;
  return { kiln, clock, members, evaluate, succeed, status, rows, rowIn, member };
}

t.test('a cluster job goes to idle workers of one zone, and every member gets the roster with the endpoints', async (t) => {
  const f = await farm(t, [{ zone: 'east', endpoint: 'east-1:7000' }, { zone: 'west', endpoint: 'west-1:7000' }, { zone: 'west', endpoint: '[fd00::2]:7000' }]);
  const [east, west1, west2] = f.members;
  const job = clusterNode('mpi-test', 2);
  await f.evaluate([job]);
  const row = await f.rowIn('preparing', 'the attempt is prepared');
  t.equal(row.zone, 'west', 'the zone with two idle workers');
  t.same([...row.members].sort(), [west1!.id, west2!.id].sort(), 'both west workers, not the east one');
  const [rank0, rank1] = row.members.map(f.member);
  const roster = row.members.map((id) => ({ workerId: id, endpoint: f.member(id).endpoint }));

  const memberJob = await rank1!.client.next('buildJob');
  t.same(memberJob.cluster, { id: row.id, rank: 1, roster }, 'rank 1 gets its rank and the roster with each worker.endpoint');
  t.equal(memberJob.drvPath, job.drvPath);
  t.equal(await f.status(job), 'queued', 'the build starts only once the other members accepted');

  // a single build while the cluster job prepares: only the east worker may take it
  const single = derivationNode('single');
  await f.evaluate([single]);
  const singleJob = await east!.client.next('buildJob');
  t.equal(singleJob.drvPath, single.drvPath, 'the members take no single job');
  f.succeed(east!.client, singleJob.jobId, single);

  rank1!.client.send({ t: 'jobAccepted', jobId: memberJob.jobId });
  const buildJob = await rank0!.client.next('buildJob');
  t.same(buildJob.cluster, { id: row.id, rank: 0, roster }, 'rank 0 gets the build with the same roster');
  t.match(buildJob.jobId, /^build:/);
  rank0!.client.send({ t: 'jobAccepted', jobId: buildJob.jobId });
  await f.rowIn('running', 'every member accepted: running');
  t.equal(await f.status(job), 'started');

  f.succeed(rank0!.client, buildJob.jobId, job);
  await eventually(() => f.status(job), { until: (s) => s === 'completed', interval: 20, message: 'the build completed' });
  await f.kiln.scheduler.passNow();
  const ended = await rank1!.client.next('cancelJob');
  t.equal(ended.jobId, memberJob.jobId, 'the build ended: rank 1 is released');
  t.equal((await f.rowIn('finished', 'the attempt finished')).id, row.id);
});

t.test('zone-<label> places the members in that zone', async (t) => {
  const f = await farm(t, [{ zone: 'east' }, { zone: 'east' }, { zone: 'west' }, { zone: 'west' }, { zone: 'west' }]);
  await f.evaluate([clusterNode('pinned', 2, ['zone-east'])]);
  const row = await f.rowIn('preparing', 'the attempt is prepared');
  t.equal(row.zone, 'east', 'the asked zone, though west has more idle workers');
});

t.test('after scheduler.clusterReserveAfterSecs the job reserves workers, which take no single job; the reservation expires', async (t) => {
  const f = await farm(t, [{ zone: null }, { zone: null }]);
  const busy = [derivationNode('busy-a'), derivationNode('busy-b')];
  await f.evaluate(busy);
  const running = await Promise.all(f.members.map(async (m) => ({ m, job: await m.client.next('buildJob') })));
  const job = clusterNode('needs-two', 2);
  await f.evaluate([job]);
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
