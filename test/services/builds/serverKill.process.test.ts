// kill -9 of a real server process (`node bin/kiln.js serve`) in the middle of an evaluation, and
// again in the middle of its builds, with protocol-level workers (no Nix): each time the next
// server on the same database re-queues what was running, the evaluation resumes, every
// derivation is recorded once, and a build that completed before a kill is never dispatched again.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import type { MessageOf } from '../../../protocol/index.js';
import { testDatabase } from '../../support/db.js';
import { freePort } from '../../support/kiln.js';
import { createTestCache } from '../../support/caches.js';
import { handshake, testHello, type ProtoClient } from '../../support/protoClient.js';
import { killServerProcess, registerAndLogin, startServerProcess, type ServerProcess } from '../../support/serverProcess.js';
import { derivationNode, narHash, type DerivationNodeFixture } from '../../support/derivationNodes.js';
import { eventually } from '../../support/eventually.js';

t.test('a server killed mid-evaluation and mid-build resumes on restart, recording and building nothing twice', async (t) => {
  const { url: databaseUrl, sql } = await testDatabase(t);
  const baseDir = await mkdtemp(join(tmpdir(), 'kiln-kill-'));
  t.teardown(() => rm(baseDir, { recursive: true, force: true }));
  const port = await freePort();
  // the protocol-level workers connect in open mode, which only a local worker gets
  const flags = ['--local-worker'];
  let server: ServerProcess = await startServerProcess(databaseUrl, baseDir, port, flags);
  t.teardown(() => server.child.kill('SIGKILL'));
  const workers: ProtoClient[] = [];
  t.teardown(() => workers.forEach((w) => w.close()));
  const connect = async () => {
    const worker = await handshake(`ws://127.0.0.1:${port}/proto`, testHello());
    workers.push(worker);
    await worker.next('welcome');
    return worker;
  };
  const restart = async () => {
    await killServerProcess(server);
    server = await startServerProcess(databaseUrl, baseDir, port, flags);
  };

  const { token } = await registerAndLogin(server.url, 'ada');
  const api = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${server.url}/api/v1${path}`, {
      method, headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) }, ...(body ? { body: JSON.stringify(body) } : {}),
    });
    return (await res.json()) as { message: unknown };
  };
  await api('PUT', '/orgs', { name: 'acme' });
  await api('PUT', '/projects/acme', { name: 'app', repository: 'file:///nonexistent' });
  const [project] = await sql<{ id: string }[]>`select id from projects where name = 'app'`;
  const cache = await createTestCache(sql, 'main', { baseDir });
  await sql`insert into subscriptions (project_id, cache_id, mode) values (${project!.id}, ${cache.id}, 0)`;

  const a = derivationNode('a');
  const b = derivationNode('b', [a.drvPath]);
  const c = derivationNode('c', [b.drvPath]);
  const attribute = { path: ['packages', 'x86_64-linux', 'c'], drvPath: c.drvPath, outputs: { out: c.out } };

  // 1. the first batch is recorded, then the server dies before the evaluation's result
  let worker = await connect();
  const evaluationId = (await api('POST', `/tasks/${project!.id}/default/evaluate`, { commit: 'c'.repeat(40) })).message as string;
  const firstEval = await worker.next('evalJob');
  worker.send({ t: 'evalBatch', jobId: firstEval.jobId, derivations: [a.derivation, b.derivation], attributes: [], errors: [] });
  await eventually(async () => (await sql`select 1 from derivations where drv_path = ${b.drvPath}`).length > 0, { interval: 20, message: 'the first batch is recorded' });
  await restart();
  t.match((await worker.closed).code, /\d+/, 'the old connection is gone with the server');

  // 2. the next server evaluates again; the worker sends the whole graph again
  worker = await connect();
  const secondEval = await worker.next('evalJob');
  t.match(secondEval.jobId, new RegExp(`^eval:${evaluationId}:`), 'the same evaluation, dispatched again');
  worker.send({ t: 'evalBatch', jobId: secondEval.jobId, derivations: [a.derivation, b.derivation, c.derivation], attributes: [attribute], errors: [] });
  worker.send({ t: 'evalResult', jobId: secondEval.jobId, commit: 'c'.repeat(40), derivationCount: 3, attributeCount: 1, errorCount: 0, durationMs: 1 });

  const dispatched: string[] = [];
  const succeed = (job: MessageOf<'buildJob'>, n: DerivationNodeFixture) => {
    dispatched.push(job.drvPath);
    worker.send({
      t: 'buildResult', jobId: job.jobId, drvPath: n.drvPath, alreadyValid: false, durationMs: 1, logBytes: 0, logDroppedBytes: 0,
      outputs: [{ name: 'out', path: n.out, narHash: narHash(), narSize: 100, references: [], deriver: n.drvPath, ca: null }],
    });
  };
  const aJob = await worker.next('buildJob');
  t.equal(aJob.drvPath, a.drvPath);
  succeed(aJob, a);
  // 3. b is running when the server dies again
  const bJob = await worker.next('buildJob');
  t.equal(bJob.drvPath, b.drvPath);
  dispatched.push(bJob.drvPath);
  const aDone = async () => (await sql<{ status: string }[]>`
    select db.status from derivation_builds db join derivations d on d.id = db.derivation_id where d.drv_path = ${a.drvPath}`)[0]?.status;
  await eventually(aDone, { until: (status) => status === 'completed', interval: 20, message: 'a completes' });
  await restart();

  worker = await connect();
  const bAgain = await worker.next('buildJob');
  t.equal(bAgain.drvPath, b.drvPath, 'the interrupted build runs again; the completed one does not');
  succeed(bAgain, b);
  const cJob = await worker.next('buildJob');
  t.equal(cJob.drvPath, c.drvPath);
  succeed(cJob, c);

  await eventually(async () => (await sql<{ phase: string }[]>`select phase from evaluations where id = ${evaluationId}`)[0],
    { until: (row) => row?.phase === 'completed', interval: 50, message: 'the evaluation completes' });
  t.same(dispatched, [a.drvPath, b.drvPath, b.drvPath, c.drvPath]);
  const [counts] = await sql<{ derivations: number; builds: number; shared: number; evaluations: number }[]>`
    select (select count(*)::int from derivations) as derivations, (select count(*)::int from builds) as builds,
           (select count(*)::int from derivation_builds) as shared, (select count(*)::int from evaluations) as evaluations`;
  t.same(counts, { derivations: 3, builds: 3, shared: 3, evaluations: 1 }, 'each derivation and build recorded once');
  const statuses = await sql<{ status: string }[]>`select status from derivation_builds`;
  t.same(statuses.map((s) => s.status), ['completed', 'completed', 'completed']);
});
