// A server stopped in the middle of an evaluation: the next server on the same database takes
// the scheduler lock, runs the evaluation again, and records each derivation once.
import { randomBytes } from 'node:crypto';
import t from 'tap';
import { loadConfig } from '../../../config/index.js';
import { startKiln } from '../../../cli/kiln.js';
import { freePort, startTestKiln, testHttpThreads } from '../../support/kiln.js';
import { signUp } from '../../support/accounts.js';
import { createTestCache } from '../../support/caches.js';
import { handshake, testHello } from '../../support/protoClient.js';
import { eventually } from '../../support/eventually.js';

const NIX32 = '0123456789abcdfghijklmnpqrsvwxyz';
const hashPart = () => Array.from(randomBytes(32), (b) => NIX32[b % 32]).join('');

t.test('an interrupted evaluation resumes on the next server', async (t) => {
  const first = await startTestKiln(t, { localWorker: true });
  const { token } = await signUp(first, 'ada');
  await first.api('PUT', '/orgs', { token, body: { name: 'acme' } });
  await first.api('PUT', '/projects/acme', { token, body: { name: 'app', repository: 'file:///nonexistent' } });
  const [project] = await first.sql<{ id: string }[]>`select id from projects where name = 'app'`;
  const cache = await createTestCache(first.sql, 'main');
  await first.sql`insert into subscriptions (project_id, cache_id, mode) values (${project!.id}, ${cache.id}, 0)`;

  const drvPath = `/nix/store/${hashPart()}-one.drv`;
  const out = `/nix/store/${hashPart()}-one`;
  const derivation = {
    drvPath, name: 'one', outputs: { out }, inputDrvs: {}, inputSrcs: [], system: 'x86_64-linux', requiredSystemFeatures: [],
    timeoutSecs: null, maxSilentSecs: null, preferLocalBuild: false, fixedOutput: false,
  };
  const before = await handshake(`ws://127.0.0.1:${first.port}/proto`, testHello());
  await before.next('welcome');
  const evaluationId = (await first.api<string>('POST', `/tasks/${project!.id}/default/evaluate`, { token, body: { commit: 'b'.repeat(40) } })).message;
  const job = await before.next('evalJob');
  before.send({ t: 'evalBatch', jobId: job.jobId, derivations: [derivation], attributes: [], errors: [] });
  // the batch is recorded, the result never comes: the server goes away
  await eventually(async () => (await first.sql`select 1 from derivations where drv_path = ${drvPath}`).length > 0, { interval: 20, message: 'the batch is recorded' });
  await first.stop();

  const loaded = loadConfig({
    scope: 'server', env: {},
    overrides: {
      ...testHttpThreads(),
      'database.url': first.db.url, 'database.minConnections': 0, 'database.cache.minConnections': 0, 'database.web.minConnections': 0,
      baseDir: first.baseDir, port: await freePort(), useTls: false, localWorker: true, 'log.level.default': 'error', 'projects.allowLocalRepositories': true,
    },
  });
  const second = await startKiln(loaded);
  t.teardown(() => second.stop());
  const after = await handshake(`ws://127.0.0.1:${second.port}/proto`, testHello());
  t.teardown(() => after.close());
  await after.next('welcome');
  const again = await after.next('evalJob');
  t.match(again.jobId, new RegExp(`^eval:${evaluationId}:`));
  after.send({ t: 'evalBatch', jobId: again.jobId, derivations: [derivation], attributes: [{ path: ['packages', 'x86_64-linux', 'one'], drvPath, outputs: { out } }], errors: [] });
  after.send({ t: 'evalResult', jobId: again.jobId, commit: 'b'.repeat(40), derivationCount: 1, attributeCount: 1, errorCount: 0, durationMs: 1 });
  const build = await after.next('buildJob');
  t.equal(build.drvPath, drvPath);
  const counts = await first.sql<{ derivations: number; builds: number; shared: number }[]>`
    select (select count(*)::int from derivations) as derivations, (select count(*)::int from builds) as builds,
           (select count(*)::int from derivation_builds) as shared`;
  t.same(counts[0], { derivations: 1, builds: 1, shared: 1 });
});
