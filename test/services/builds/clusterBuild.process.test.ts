// A cluster job end to end with real Nix (issue 23 item 6, docs/builds.md "Cluster jobs"): a
// derivation asking for `cluster-2` is placed on two real `kiln worker` processes; the member of
// rank 1 holds a slot with the roster (each member's worker.endpoint, in rank order), rank 0 tells
// Nix it has the cluster feature and builds. Without that option Nix refuses the derivation
// ("a 'x86_64-linux' with features {cluster-2} is required").
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import t from 'tap';
import { startTestKiln } from '../../support/kiln.js';
import { subscribedProject } from '../../support/subscribedProject.js';
import { createFlakeRepo } from '../../support/flakeRepo.js';
import { spawnWorker, type WorkerProcess } from '../../support/workerProcess.js';
import { requireNix } from '../../support/nixStore.js';
import { eventually } from '../../support/eventually.js';

requireNix();

const flake = (nonce: string) => `{
  outputs = { self }: {
    packages.x86_64-linux.mpi = derivation {
      name = "kiln-cluster-mpi"; system = "x86_64-linux"; builder = "/bin/sh"; PATH = "/bin:/usr/bin"; nonce = "${nonce}";
      requiredSystemFeatures = [ "cluster-2" ];
      args = [ "-c" "echo rank 0 builds; mkdir $out; echo done > $out/data" ];
    };
  };
}
`;

t.test('a cluster-2 derivation is built by rank 0 while rank 1 holds a slot with the roster', { timeout: 180_000 }, async (t) => {
  const kiln = await startTestKiln(t, { localWorker: true }); // open mode for workers on loopback; no worker of its own without worker.enable
  const work = mkdtempSync(join(tmpdir(), 'kiln-cluster-'));
  t.teardown(() => rmSync(work, { recursive: true, force: true }));
  const repo = createFlakeRepo(join(work, 'repo'), { 'flake.nix': flake(randomBytes(8).toString('hex')) });
  const { token } = await subscribedProject(kiln, { repository: repo.url, publicCache: true });

  const workers: WorkerProcess[] = ['one', 'two'].map((name) => spawnWorker({
    serverUrl: `ws://127.0.0.1:${kiln.port}/proto`, baseDir: join(work, name), args: ['--endpoint', `${name}.cluster.test:7000`],
  }));
  for (const worker of workers) t.teardown(() => worker.stop());
  await Promise.all(workers.map((w) => w.waitForLog((l) => l.msg === 'accepted by the server')));

  const started = await kiln.api<string>('POST', '/projects/acme/app/evaluate', { token });
  if (started.error) throw new Error(String(started.message));
  const evaluationId = started.message;
  const phase = await eventually(async () => {
    const got = await kiln.api<{ phase: string }>('GET', `/evals/${evaluationId}`, { token });
    if (got.error) throw new Error(String(got.message));
    return got.message.phase;
  }, { until: (p) => ['completed', 'failed', 'aborted'].includes(p), timeout: 150_000, interval: 200, message: 'the evaluation ends' });
  t.equal(phase, 'completed', 'the evaluation ended');

  const [job] = await kiln.sql<{ state: string; members: string[] }[]>`
    select cj.state, cj.members from cluster_jobs cj join builds b on b.derivation_build_id = cj.derivation_build_id
    where b.evaluation_id = ${evaluationId} order by cj.created_at desc limit 1`;
  t.equal(job?.state, 'finished');
  t.equal(new Set(job?.members).size, 2, 'two distinct members');
  const [build] = await kiln.sql<{ worker_id: string; status: string }[]>`
    select db.worker_id, db.status from builds b join derivation_builds db on db.id = b.derivation_build_id where b.evaluation_id = ${evaluationId}`;
  t.equal(build?.status, 'completed', 'the cluster build completed (Nix refuses it without the cluster feature)');
  t.equal(build?.worker_id, job?.members[0], 'rank 0 built it');

  // rank 1 held its slot before rank 0 started, so its line is already here
  const held = workers.flatMap((w) => w.logs).find((l) => l.msg === 'holding a slot for a cluster job');
  t.equal(held?.['rank'], 1, 'rank 1 held a slot');
  const endpoints = (held?.['roster'] ?? []) as { workerId: string; endpoint: string | null }[];
  t.same(endpoints.map((m) => m.workerId), job?.members, 'the roster lists the members in rank order');
  t.same(endpoints.map((m) => m.endpoint).sort(), ['one.cluster.test:7000', 'two.cluster.test:7000'], 'with each worker.endpoint');
});
