// The shared evaluation cache end to end (docs/worker.md, "The shared evaluation cache"): a real
// kiln and real `kiln worker` processes with real Nix. A first worker evaluates a flake whose
// attributes are expensive and uploads the eval cache Nix wrote; a second worker with an empty
// cache directory evaluates the same commit of the same project, installs the blob the server
// offered and answers from it (the evaluator's function calls drop by orders of magnitude); a
// project of another organization with the same repository and commit is offered nothing.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import t from 'tap';
import { startTestKiln, type TestKiln } from '../../support/kiln.js';
import { subscribedProject } from '../../support/subscribedProject.js';
import { signUp } from '../../support/accounts.js';
import { createTestCache } from '../../support/caches.js';
import { createFlakeRepo, shellFlake } from '../../support/flakeRepo.js';
import { spawnWorker } from '../../support/workerProcess.js';
import { requireNix } from '../../support/nixStore.js';
import { eventually } from '../../support/eventually.js';
import { testDatabase } from '../../support/db.js';
import { insertProject } from '../../support/modelRows.js';
import { gzipSync } from 'node:zlib';
import { FilesystemBlobStore } from '../../../storage/index.js';
import { EvalCacheBlobs } from '../../../services/builds/index.js';

requireNix();

interface EvalView { phase: string; error: string | null; statistics: { wall_seconds: number | null; evaluator: { function_calls: number; cpu_seconds: number; runs: number } | null } | null }

async function evaluate(kiln: TestKiln, token: string, project: string): Promise<EvalView> {
  const started = await kiln.api<string>('POST', `/projects/${project}/evaluate`, { token });
  if (started.status !== 200) throw new Error(`evaluate ${project}: ${String(started.message)}`);
  return eventually(async () => (await kiln.api<EvalView>('GET', `/evals/${started.message}`, { token })).message,
    { until: (e) => ['completed', 'failed', 'aborted'].includes(e.phase) && e.statistics?.evaluator !== undefined, timeout: 180_000, interval: 200, message: `the evaluation of ${project} ends` });
}

t.test('a second worker answers the same commit from the eval cache the first one shared, and no other project gets it', { timeout: 420_000 }, async (t) => {
  const work = mkdtempSync(join(tmpdir(), 'kiln-evalcache-'));
  t.teardown(() => rmSync(work, { recursive: true, force: true }));
  const kiln = await startTestKiln(t, { localWorker: true });
  // Each attribute costs millions of thunks to evaluate; the builds themselves are trivial.
  const repo = createFlakeRepo(join(work, 'repo'), { 'flake.nix': shellFlake(randomBytes(8).toString('hex'), `      heavy = n: builtins.foldl' (a: b: a + b) 0 (builtins.genList (i: i * 2) n);
      one = mk "kiln-evalcache-one" "echo \${toString (heavy 1500000)} > $out";
      two = mk "kiln-evalcache-two" "echo \${toString (heavy 1500001)} > $out";`) });
  const { token, projectId } = await subscribedProject(kiln, { repository: repo.url, publicCache: true });
  const serverUrl = `ws://127.0.0.1:${kiln.port}/proto`;

  const first = spawnWorker({ serverUrl, baseDir: join(work, 'worker-1') });
  t.teardown(() => first.stop());
  const cold = await evaluate(kiln, token, 'acme/app');
  t.equal(cold.phase, 'completed', cold.error ?? '');
  await first.stop();
  const rows = await kiln.sql<{ project_id: string; commit: string; fingerprint: string; size: string }[]>`select project_id, commit, fingerprint, size from eval_cache_blobs`;
  t.equal(rows.length, 1, 'the first evaluation shared one eval cache');
  t.match(rows[0], { project_id: projectId, commit: repo.commit, fingerprint: /^v2-[0-9a-f]{64}$/ }, 'keyed by the project and the commit');

  const second = spawnWorker({ serverUrl, baseDir: join(work, 'worker-2') });
  t.teardown(() => second.stop());
  const warm = await evaluate(kiln, token, 'acme/app');
  t.equal(warm.phase, 'completed', warm.error ?? '');
  const installed = join(work, 'worker-2', 'eval-cache', projectId, 'nix', 'eval-cache-v2', `${rows[0]!.fingerprint.slice(3)}.sqlite`);
  t.ok(existsSync(installed), 'the second worker installed the shared cache in the project\'s cache directory');
  const coldCalls = cold.statistics!.evaluator!.function_calls;
  const warmCalls = warm.statistics!.evaluator!.function_calls;
  t.comment(`function calls: cold ${coldCalls}, from the shared cache ${warmCalls}; evaluator CPU: cold ${cold.statistics!.evaluator!.cpu_seconds} s, from the shared cache ${warm.statistics!.evaluator!.cpu_seconds} s`);
  t.ok(coldCalls > 1_000_000, 'the cold evaluation evaluated the attributes');
  t.ok(warmCalls * 20 < coldCalls, 'the second evaluation answered from the shared cache, not by evaluating');

  // Another organization's project with the same repository and commit: nothing is offered to it.
  const bob = await signUp(kiln, 'bob');
  await kiln.api('PUT', '/orgs', { token: bob.token, body: { name: 'other' } });
  const made = await kiln.api('PUT', '/projects/other', { token: bob.token, body: { name: 'copy', repository: repo.url, wildcard: 'packages.x86_64-linux.*' } });
  t.equal(made.status, 200, String(made.message));
  const [copy] = await kiln.sql<{ id: string }[]>`select id from projects where name = 'copy'`;
  const cache = await createTestCache(kiln.sql, 'other-main', { public: true });
  await kiln.sql`insert into subscriptions (project_id, cache_id, mode) values (${copy!.id}, ${cache.id}, 0)`;
  const other = await evaluate(kiln, bob.token, 'other/copy');
  t.equal(other.phase, 'completed', other.error ?? '');
  t.ok(other.statistics!.evaluator!.function_calls > 1_000_000, 'the other project\'s evaluation evaluated everything itself');
  const owners = await kiln.sql<{ project_id: string }[]>`select distinct project_id from eval_cache_blobs order by project_id`;
  t.same(owners.map((r) => r.project_id).sort(), [projectId, copy!.id].sort(), 'each project\'s cache is its own row');
});

t.test('the sweep evicts by age, by deleted project and by total size, blobs with their rows', { timeout: 60_000 }, async (t) => {
  const { sql } = await testDatabase(t);
  const root = mkdtempSync(join(tmpdir(), 'kiln-evalcache-blobs-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  const blobs = new FilesystemBlobStore(root);
  const project = { id: await insertProject(sql, 'acme', 'app') };
  let now = new Date('2026-01-01T00:00:00Z');
  const store = new EvalCacheBlobs(sql, blobs, { maxAgeDays: 30, maxTotalBytes: 1_000_000 }, () => now);
  const blob = (n: number) => gzipSync(Buffer.concat([Buffer.from('SQLite format 3\0', 'latin1'), randomBytes(n)]));
  const name = (c: string) => `v2-${c.repeat(64)}`;
  const commit = (c: string) => c.repeat(40);
  const keys = async () => (await sql<{ fingerprint: string }[]>`select fingerprint from eval_cache_blobs order by fingerprint`).map((r) => r.fingerprint);
  await store.store(project.id, commit('a'), name('a'), blob(1000));
  now = new Date('2026-01-20T00:00:00Z');
  await store.store(project.id, commit('b'), name('b'), blob(1000));
  await store.store('00000000-0000-4000-8000-000000000000', commit('c'), name('c'), blob(10));
  await t.rejects(store.store(project.id, commit('d'), name('d'), Buffer.from('not gzip')), /gzip/, 'what is not gzip is refused');

  now = new Date('2026-02-05T00:00:00Z'); // a: 35 days unused, b: 16 days
  const swept = await store.sweep();
  t.equal(swept.deleted, 2, 'the blob unused for maxAgeDays and the deleted project\'s blob');
  t.same(await keys(), [name('b')]);
  t.equal(await blobs.stat(`eval-cache/${project.id}/${name('a')}`), null, 'the evicted blob left storage with its row');
  t.equal(await store.offer(project.id, commit('a')), null, 'an evicted blob is not offered');
  t.equal((await store.offer(project.id, commit('b')))?.fingerprint, name('b'), 'the kept one is offered to its project at its commit');
  t.equal(await store.offer('00000000-0000-4000-8000-000000000001', commit('b')), null, 'and to no other project');

  // Over maxTotalBytes: the least recently used go until the rest fits.
  now = new Date('2026-02-06T00:00:00Z');
  await store.store(project.id, commit('e'), name('e'), blob(600_000));
  now = new Date('2026-02-07T00:00:00Z');
  await store.store(project.id, commit('f'), name('f'), blob(600_000));
  const bySize = await store.sweep();
  t.same(await keys(), [name('f')], 'the newest fits alone; b and e, used before it, are evicted');
  t.equal(bySize.deleted, 2);
});
