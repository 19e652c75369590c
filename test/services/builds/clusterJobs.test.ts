// Cluster jobs (issue 23 item 6; docs/builds.md, "Cluster jobs") on the real server and database
// with protocol-level workers (no Nix) and a clock that moves only when the test steps it: a
// `cluster-N` build is placed on N idle workers of one zone, members get the roster with their
// endpoints, a build that waited scheduler.clusterReserveAfterSecs reserves workers (which take no
// single job), a reservation expires after clusterReserveTimeoutSecs, and an attempt whose members
// do not all accept within clusterPrepareTimeoutSecs aborts and the build goes back to the queue.
import t from 'tap';
import { eventually } from '../../support/eventually.js';
import { derivationNode } from '../../support/derivationNodes.js';
import { clusterFarm as farm, clusterNode } from '../../support/clusterFarm.js';

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
