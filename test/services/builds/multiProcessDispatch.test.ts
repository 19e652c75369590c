// Two server processes on one database (docs/builds.md, "Several server processes"): a worker
// connected to the process that does not hold the scheduler lock gets its jobs too, each job goes
// to one worker only, and jobs left by a process that is gone are re-queued by the lock holder.
import { randomUUID } from 'node:crypto';
import t from 'tap';
import { loadConfig } from '../../../config/index.js';
import { startKiln } from '../../../cli/kiln.js';
import { freePort, startTestKiln, testHttpThreads } from '../../support/kiln.js';
import { signUp } from '../../support/accounts.js';
import { createTestCache } from '../../support/caches.js';
import { handshake, testHello } from '../../support/protoClient.js';
import { derivationNode, nix32, type DerivationNodeFixture } from '../../support/derivationNodes.js';
import { eventually } from '../../support/eventually.js';

t.test('a worker on the second process gets jobs; a dead process\'s jobs are re-queued', async (t) => {
  const first = await startTestKiln(t, { localWorker: true });
  const loaded = loadConfig({
    scope: 'server', env: {},
    overrides: {
      ...testHttpThreads(),
      'database.url': first.db.url, 'database.minConnections': 0, 'database.cache.minConnections': 0, 'database.web.minConnections': 0,
      'database.maxConnections': 5, 'database.cache.maxConnections': 4, 'database.web.maxConnections': 4,
      baseDir: first.baseDir, port: await freePort(), useTls: false, localWorker: true, 'log.level.default': 'error', 'projects.allowLocalRepositories': true,
    },
  });
  const second = await startKiln(loaded);
  t.teardown(() => second.stop());
  const instances = await first.sql<{ id: string }[]>`select id from server_instances`;
  t.equal(instances.length, 2, 'both processes registered');

  const { token } = await signUp(first, 'ada');
  await first.api('PUT', '/orgs', { token, body: { name: 'acme' } });
  await first.api('PUT', '/projects/acme', { token, body: { name: 'app', repository: 'file:///nonexistent' } });
  const [project] = await first.sql<{ id: string }[]>`select id from projects where name = 'app'`;
  const cache = await createTestCache(first.sql, 'main');
  await first.sql`insert into subscriptions (project_id, cache_id, mode) values (${project!.id}, ${cache.id}, 0)`;

  // the first process holds the scheduler lock (it started first); the worker talks to the second
  const worker = await handshake(`ws://127.0.0.1:${second.port}/proto`, testHello({ maxConcurrentBuilds: 4 }));
  t.teardown(() => worker.close());
  await worker.next('welcome');
  const one = derivationNode('one');
  const two = derivationNode('two');
  const evaluationId = (await first.api<string>('POST', `/tasks/${project!.id}/default/evaluate`, { token, body: { commit: 'd'.repeat(40) } })).message;
  const evalJob = await worker.next('evalJob');
  t.match(evalJob.jobId, new RegExp(`^eval:${evaluationId}:1$`), 'the evaluation reaches the worker through the second process');
  const attrs = [one, two].map((n) => ({ path: ['packages', 'x86_64-linux', n.derivation.name], drvPath: n.drvPath, outputs: { out: n.out } }));
  worker.send({ t: 'evalBatch', jobId: evalJob.jobId, derivations: [one.derivation, two.derivation], attributes: attrs, errors: [] });
  worker.send({ t: 'evalResult', jobId: evalJob.jobId, commit: 'd'.repeat(40), derivationCount: 2, attributeCount: 2, errorCount: 0, durationMs: 1 });

  const jobs = [await worker.next('buildJob'), await worker.next('buildJob')];
  t.same(jobs.map((j) => j.drvPath).sort(), [one.drvPath, two.drvPath].sort(), 'each build dispatched once');
  const succeed = (jobId: string, n: DerivationNodeFixture) => worker.send({
    t: 'buildResult', jobId, drvPath: n.drvPath, alreadyValid: false, durationMs: 1, logBytes: 0, logDroppedBytes: 0,
    outputs: [{ name: 'out', path: n.out, narHash: `sha256:${nix32(52)}`, narSize: 1, references: [], deriver: n.drvPath, ca: null }],
  });
  succeed(jobs.find((j) => j.drvPath === one.drvPath)!.jobId, one);

  // a process that died with "two" running: its worker's connection row stays open, but no live process holds it
  const ghostInstance = randomUUID();
  const ghostWorker = randomUUID();
  await first.sql`insert into server_instances (id, lock_key) values (${ghostInstance}, 1)`;
  await first.sql`insert into worker_connections (worker_id, hello, server_instance_id) values (${ghostWorker}, '{}', ${ghostInstance})`;
  const twoJob = jobs.find((j) => j.drvPath === two.drvPath)!;
  await first.sql`
    update derivation_builds set worker_id = ${ghostWorker}
    where derivation_id = (select id from derivations where drv_path = ${two.drvPath})`;
  const again = await worker.next('buildJob');
  t.equal(again.drvPath, two.drvPath, 'the lock holder re-queued the ghost\'s job and it was dispatched again');
  t.not(again.jobId, twoJob.jobId, 'as a new attempt');
  succeed(again.jobId, two);
  await eventually(async () => (await first.sql<{ phase: string }[]>`select phase from evaluations where id = ${evaluationId}`)[0],
    { until: (row) => row?.phase === 'completed', interval: 50, message: 'the evaluation completes' });
  const live = await first.sql<{ n: number }[]>`select count(*)::int as n from derivation_builds where status = 'completed'`;
  t.equal(live[0]!.n, 2);
});
