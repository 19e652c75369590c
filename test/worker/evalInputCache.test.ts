// The shared evaluation cache (docs/eval-cache.md) with real Nix, a real kiln server and in-process
// workers: a flake locks a tarball input served over loopback HTTP. Worker A evaluates it and
// uploads the input; the input then leaves the store and its origin; worker B restores it from the
// server and evaluates without asking the origin. Another organization's capability cannot read it,
// a NAR of another hash is refused with nothing kept, the sweep evicts by age and by total size on
// an injected clock, and worker.eval.cache.share false neither downloads nor uploads.
import t from 'tap';
import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import { randomUUID } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Sql } from 'postgres';
import { sweepEvalInputs } from '../../services/index.js';
import { mintInputCache, ORPHAN_GRACE_MS } from '../../services/builds/evalInputCache.js';
import { restoreInputs } from '../../worker/inputCache.js';
import { signUp } from '../support/accounts.js';
import { steppedClock } from '../support/clock.js';
import { startInProcessWorker } from '../support/inProcessWorker.js';
import { startTestKiln, type TestKiln } from '../support/kiln.js';
import { nixEnv, requireNix, tempDir } from '../support/nixStore.js';
import { startStaticServer } from '../support/staticServer.js';
import { handshake, testHello } from '../support/protoClient.js';
import { TEST_NIX_CONFIG } from '../support/workerProcess.js';

requireNix();
const dir = tempDir('kiln-eval-inputs-');
const env: NodeJS.ProcessEnv = { ...nixEnv(), NIX_CONFIG: TEST_NIX_CONFIG, XDG_CACHE_HOME: join(dir, 'lock-cache') };
const git = (repo: string, args: string[]) => execFileSync('git', ['-C', repo, '-c', 'user.email=t@kiln.invalid', '-c', 'user.name=t', ...args], { encoding: 'utf8' }).trim();
const nixStore = (args: string[]) => execFileSync('nix-store', args, { env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();

/** A tarball input (served from `served`) and a flake repository that locks it and reads it during evaluation. */
/** `unused`: a second tarball input the evaluation never reads. */
async function flakeWithInput(served: string, baseUrl: string, name: string, unused?: string): Promise<{ url: string; commit: string; marker: string }> {
  const marker = randomUUID().replaceAll('-', '');
  for (const tarball of unused ? [name, unused] : [name]) {
    const tree = join(dir, `input-${tarball}`, 'dep');
    mkdirSync(tree, { recursive: true });
    writeFileSync(join(tree, 'data'), `${marker}${tarball === name ? '' : '-unused'}`);
    execFileSync('tar', ['-czf', join(served, `${tarball}.tar.gz`), '-C', join(tree, '..'), 'dep']);
  }
  const repo = join(dir, `repo-${name}`);
  mkdirSync(repo, { recursive: true });
  execFileSync('git', ['init', '--quiet', '-b', 'main', repo]);
  writeFileSync(join(repo, 'flake.nix'), `{
  inputs.dep = { url = "${baseUrl}/${name}.tar.gz"; flake = false; };
${unused ? `  inputs.unused = { url = "${baseUrl}/${unused}.tar.gz"; flake = false; };\n` : ''}  outputs = { self, dep, ... }: {
    packages.x86_64-linux.default = derivation {
      name = "kiln-input-\${builtins.readFile "\${dep}/data"}";
      system = "x86_64-linux"; builder = "/bin/sh"; args = [ "-c" "touch $out" ];
    };
  };
}
`);
  git(repo, ['add', '.']);
  // not execFileSync: the origin answers from this process
  await promisify(execFile)('nix', ['--extra-experimental-features', 'nix-command flakes', 'flake', 'lock', repo], { env });
  git(repo, ['add', '.']);
  git(repo, ['commit', '--quiet', '-m', 'flake']);
  return { url: `file://${repo}`, commit: git(repo, ['rev-parse', 'HEAD']), marker };
}

/** The input's store path and NAR hash (hex), as flake.lock pins them. */
function lockedInput(repoUrl: string, node = 'dep'): { path: string; hex: string } {
  const lock = JSON.parse(readFileSync(join(repoUrl.slice('file://'.length), 'flake.lock'), 'utf8')) as { nodes: Record<string, { locked: { narHash: string } }> };
  const sri = lock.nodes[node]!.locked.narHash;
  const hex = Buffer.from(sri.slice('sha256-'.length), 'base64').toString('hex');
  const path = nixStore(['--print-fixed-path', '--recursive', 'sha256', hex, 'source']);
  return { path, hex };
}

/** An evaluation running on `workerId` (a live connection: the scheduler re-queues one whose worker is gone). */
async function evaluation(kiln: TestKiln, projectId: string, workerId: string): Promise<string> {
  const [row] = await kiln.sql<{ id: string }[]>`
    insert into evaluations (task_id, repository, commit, wildcard, phase, worker_id)
    select id, 'file:///nonexistent', null, 'packages.*', 'evaluating', ${workerId} from tasks where project_id = ${projectId} and name = 'default'
    returning id`;
  return row!.id;
}

const rowsOf = (sql: Sql, org: string) => sql<{ nar_hash: string; size: string }[]>`
  select nar_hash, size from eval_input_blobs b join organizations o on o.id = b.organization_id where o.name = ${org}`;

async function blobKeys(kiln: TestKiln): Promise<string[]> {
  const keys: string[] = [];
  for await (const entry of kiln.nars.blobs.list('eval-inputs/')) keys.push(entry.key);
  return keys;
}

t.test('the shared evaluation cache', async (t) => {
  const clock = steppedClock(new Date('2026-01-01T00:00:00Z'));
  const kiln = await startTestKiln(t, { localWorker: true }, { clock, upkeepTimers: false });
  // the workers below talk to a test /proto server; this one holds the evaluations' rows for the scheduler
  const holder = testHello({ capabilities: { eval: false, build: false, fetch: false, federate: false } });
  const connection = await handshake(`ws://127.0.0.1:${kiln.port}/proto`, holder);
  t.teardown(() => connection.close());
  await connection.next('welcome');
  const ada = await signUp(kiln, 'ada');
  const eve = await signUp(kiln, 'eve');
  const projectIds: Record<string, string> = {};
  for (const [who, org] of [[ada, 'acme'], [eve, 'evil']] as const) {
    await kiln.api('PUT', '/orgs', { token: who.token, body: { name: org } });
    await kiln.api('PUT', `/projects/${org}`, { token: who.token, body: { name: 'app', repository: 'file:///nonexistent' } });
    const [p] = await kiln.sql<{ id: string }[]>`select p.id from projects p join organizations o on o.id = p.organization_id where o.name = ${org}`;
    projectIds[org] = p!.id;
  }
  // an organization with one old input, for the fair eviction (its sign-in would expire later: the clock steps a month)
  await kiln.api('PUT', '/orgs', { token: ada.token, body: { name: 'small' } });
  const served = join(dir, 'served');
  mkdirSync(served, { recursive: true });
  const origin = await startStaticServer(t, served);
  const flake = await flakeWithInput(served, origin.url, 'dep');
  const input = lockedInput(flake.url);
  const originAsked = () => origin.requests.filter((r) => r.endsWith('/dep.tar.gz')).length;
  const capability = async (org: string) => {
    const id = await evaluation(kiln, projectIds[org]!, holder.workerId);
    // as the scheduler's dispatch writes it
    const { access, tokenHash } = mintInputCache(kiln.url, id);
    await kiln.sql`update evaluations set input_cache_token_hash = ${tokenHash} where id = ${id}`;
    return { id, ...access };
  };
  const evalJob = (jobId: string, cap: { url: string; token: string }) => ({
    t: 'evalJob' as const, jobId, project: projectIds['acme']!, repository: flake.url, commit: flake.commit, attributes: 'packages.x86_64-linux.default', timeoutSecs: 120, inputCache: { url: cap.url, token: cap.token },
  });

  const capA = await capability('acme');
  t.test('worker A evaluates and uploads the locked input', async (t) => {
    const { session } = await startInProcessWorker(t, join(dir, 'a'));
    session.send(evalJob('a', capA));
    const outcome = await session.evalOutcome('a');
    t.equal(outcome.final.t, 'evalResult', outcome.final.t === 'jobFailed' ? outcome.final.failure.message : '');
    t.same(outcome.batches.flatMap((b) => b.errors), [], 'no attribute failed');
    t.match(outcome.batches.flatMap((b) => b.attributes).map((a) => a.drvPath), [new RegExp(`kiln-input-${flake.marker}\\.drv$`)]);
    t.same((await rowsOf(kiln.sql, 'acme')).map((r) => r.nar_hash), [input.hex], 'the input is in acme\'s shared blobs, keyed by its narHash');
  });

  t.test('another organization\'s capability reads nothing of it', async (t) => {
    const capE = await capability('evil');
    const query = await fetch(`${capE.url}/query?token=${capE.token}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ narHashes: [input.hex] }) });
    t.same(((await query.json()) as { message: unknown }).message, { present: [] });
    t.equal((await fetch(`${capE.url}/${input.hex}?token=${capE.token}`)).status, 404, 'knowing the hash is not enough');
    t.equal((await fetch(`${capA.url.replace(capA.id, capE.id)}/${input.hex}?token=${capA.token}`)).status, 404, 'nor is acme\'s token on evil\'s evaluation');
    t.equal((await fetch(`${capA.url}/${input.hex}?token=${capA.token}`)).status, 200, 'acme\'s own capability reads it');
  });

  t.test('a NAR that is not the named hash is refused and nothing stays', async (t) => {
    const wrong = 'f'.repeat(64);
    const before = await blobKeys(kiln);
    // named by a query first: a hash the query did not find missing is refused before its bytes (evalInputCapability.test.ts)
    await fetch(`${capA.url}/query?token=${capA.token}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ narHashes: [wrong] }) });
    const res = await fetch(`${capA.url}/${wrong}?token=${capA.token}`, { method: 'PUT', body: 'not the NAR of that hash' });
    const body = (await res.json()) as { code?: string; message: string };
    t.equal(res.status, 400);
    t.equal(body.code, 'eval_input_mismatch', body.message);
    t.same((await rowsOf(kiln.sql, 'acme')).map((r) => r.nar_hash), [input.hex], 'no row');
    t.same(await blobKeys(kiln), before, 'no blob');
  });

  // (subtests run in turn after this function's body: the steps between them are subtests too)
  t.test('the input leaves the store and its origin: only the server still has it', async (t) => {
    nixStore(['--delete', input.path]);
    rmSync(join(served, 'dep.tar.gz'));
    t.equal(nixStore(['--check-validity', '--print-invalid', input.path]), input.path);
  });

  t.test('worker.eval.cache.share false: no download (and so no evaluation without the origin)', async (t) => {
    const { session } = await startInProcessWorker(t, join(dir, 'c'), { 'worker.eval.cache.share': false });
    session.send(evalJob('c', await capability('acme')));
    const outcome = await session.evalOutcome('c');
    t.equal(outcome.final.t, 'evalResult');
    t.match(outcome.batches.flatMap((b) => b.errors), [{ message: /unable to download .*dep\.tar\.gz/ }], 'the origin is gone and the worker did not ask the server');
    t.equal(nixStore(['--check-validity', '--print-invalid', input.path]), input.path, 'the input was not restored');
  });

  t.test('worker B restores the input from the server instead of its origin', async (t) => {
    const { session } = await startInProcessWorker(t, join(dir, 'b'));
    const askedNow = originAsked();
    session.send(evalJob('b', await capability('acme')));
    const outcome = await session.evalOutcome('b');
    t.equal(outcome.final.t, 'evalResult', outcome.final.t === 'jobFailed' ? outcome.final.failure.message : '');
    t.equal(originAsked(), askedNow, 'the origin was not asked');
    t.equal(nixStore(['--check-validity', '--print-invalid', input.path]), '', 'the input is valid at the path the lock names');
  });

  t.test('a blob altered in storage is not restored: the worker checks the lock\'s hash itself', async (t) => {
    const [row] = await kiln.sql<{ blob_key: string }[]>`select blob_key from eval_input_blobs where nar_hash = ${input.hex}`;
    const original = await kiln.nars.blobs.get(row!.blob_key);
    const chunks: Buffer[] = [];
    for await (const chunk of original!.body) chunks.push(Buffer.from(chunk));
    const altered = Buffer.concat(chunks);
    altered.writeUInt8(altered.readUInt8(altered.length - 20) ^ 1, altered.length - 20);
    await kiln.nars.blobs.put(row!.blob_key, (async function* () { yield altered; })());
    nixStore(['--delete', input.path]);
    const report = await restoreInputs(await capability('acme'), [{ narHash: input.hex, storePath: input.path }], { baseDir: join(dir, 'e'), env, signal: new AbortController().signal });
    t.same(report.done, []);
    t.match(report.problems, [/not the [0-9a-f]{64} flake\.lock pins/]);
    t.equal(nixStore(['--check-validity', '--print-invalid', input.path]), input.path, 'nothing was added');
    await kiln.nars.blobs.put(row!.blob_key, (async function* () { yield Buffer.concat(chunks); })());
  });

  t.test('worker.eval.cache.share false: no upload', async (t) => {
    const second = await flakeWithInput(served, origin.url, 'other');
    const { session } = await startInProcessWorker(t, join(dir, 'd'), { 'worker.eval.cache.share': false });
    session.send({ ...evalJob('d', await capability('acme')), repository: second.url, commit: second.commit });
    const outcome = await session.evalOutcome('d');
    t.equal(outcome.final.t, 'evalResult', outcome.final.t === 'jobFailed' ? outcome.final.failure.message : '');
    t.same((await rowsOf(kiln.sql, 'acme')).map((r) => r.nar_hash), [input.hex], 'the second input was not uploaded');
  });

  t.test('worker.capabilities.fetch: on, every locked input is prefetched and shared; off, only what the evaluation reads is fetched and nothing is shared', async (t) => {
    const pair = await flakeWithInput(served, origin.url, 'used', 'unused');
    const used = lockedInput(pair.url);
    const unused = lockedInput(pair.url, 'unused');
    nixStore(['--delete', used.path, unused.path]);
    const valid = (path: string) => nixStore(['--check-validity', '--print-invalid', path]) === '';
    const shared = async () => (await rowsOf(kiln.sql, 'acme')).map((r) => r.nar_hash).filter((h) => h === used.hex || h === unused.hex).sort();
    const run = async (name: string, fetch: boolean) => {
      const { session } = await startInProcessWorker(t, join(dir, name), { 'worker.capabilities.fetch': fetch });
      session.send({ ...evalJob(name, await capability('acme')), repository: pair.url, commit: pair.commit });
      const outcome = await session.evalOutcome(name);
      t.equal(outcome.final.t, 'evalResult');
      t.same(outcome.batches.flatMap((b) => b.errors), []);
    };
    await run('fetch-off', false);
    t.ok(valid(used.path), 'fetch off: the input the evaluation reads was fetched');
    t.notOk(valid(unused.path), 'fetch off: the unused one was not');
    t.same(await shared(), [], 'fetch off: nothing was uploaded');
    await run('fetch-on', true);
    t.ok(valid(unused.path), 'fetch on: the unused input was prefetched');
    t.same(await shared(), [used.hex, unused.hex].sort(), 'fetch on: both were uploaded');
  });

  t.test('an ended evaluation\'s capability reads nothing', async (t) => {
    await kiln.sql`update evaluations set phase = 'completed' where id = ${capA.id}`;
    t.equal((await fetch(`${capA.url}/${input.hex}?token=${capA.token}`)).status, 404);
  });

  t.test('the sweep removes blobs without a row (a deleted organization\'s) once they are past the grace period', async (t) => {
    const [gone] = await kiln.sql<{ id: string }[]>`select id from organizations where name = 'evil'`;
    const key = `eval-inputs/${gone!.id}/${'5'.repeat(64)}-test`;
    await kiln.nars.blobs.put(key, (async function* () { yield Buffer.from('bytes of an organization deleted since'); })());
    const deleted = await kiln.api('DELETE', '/orgs/evil', { token: eve.token });
    t.equal(deleted.status, 200, JSON.stringify(deleted.message));
    const none = { maxAgeDays: 0, maxTotalBytes: 0 };
    t.same(await sweepEvalInputs(kiln.sql, kiln.nars.blobs, none, new Date()), { aged: 0, evictedForSize: 0, orphans: 0 }, 'a fresh blob may be an upload whose row is coming');
    t.same(await sweepEvalInputs(kiln.sql, kiln.nars.blobs, none, new Date(Date.now() + ORPHAN_GRACE_MS + 60_000)), { aged: 0, evictedForSize: 0, orphans: 1 });
    t.notOk((await blobKeys(kiln)).includes(key), 'the orphan is gone');
    t.equal((await blobKeys(kiln)).length, (await rowsOf(kiln.sql, 'acme')).length, 'every other blob has its row');
  });

  t.test('the sweep evicts by age, then least recently used by total size', async (t) => {
    const day = 86_400_000;
    const [org] = await kiln.sql<{ id: string }[]>`select id from organizations where name = 'acme'`;
    const put = async (hex: string, size: number, lastUsed: Date) => {
      const key = `eval-inputs/${org!.id}/${hex}-test`;
      await kiln.nars.blobs.put(key, (async function* () { yield Buffer.alloc(size); })());
      await kiln.sql`insert into eval_input_blobs (organization_id, nar_hash, blob_key, size, created_at, last_used_at)
        values (${org!.id}, ${hex}, ${key}, ${size}, ${lastUsed}, ${lastUsed})`;
    };
    await kiln.sql`delete from eval_input_blobs`;
    for (const key of await blobKeys(kiln)) await kiln.nars.blobs.delete(key);
    const now = clock.now();
    await put('1'.repeat(64), 100, new Date(now.getTime() - 31 * day));
    await put('2'.repeat(64), 100, new Date(now.getTime() - 3 * day));
    await put('3'.repeat(64), 100, new Date(now.getTime() - 2 * day));
    await put('4'.repeat(64), 100, new Date(now.getTime() - 1 * day));
    const limits = { maxAgeDays: 30, maxTotalBytes: 250 };
    t.same(await sweepEvalInputs(kiln.sql, kiln.nars.blobs, limits, now), { aged: 1, evictedForSize: 1, orphans: 0 });
    t.same((await kiln.sql<{ nar_hash: string }[]>`select nar_hash from eval_input_blobs order by nar_hash`).map((r) => r.nar_hash[0]), ['3', '4'],
      'the one unused for 31 days and the least recently used of the rest are gone');
    t.same((await blobKeys(kiln)).map((k) => k.split('/')[2]![0]).sort(), ['3', '4'], 'and their blobs');
    clock.step(2 * day);
    t.same(await kiln.upkeep.evalInputSweep(), { aged: 0, evictedForSize: 0, orphans: 0 }, 'the configured limits (30 days, 10 GiB) on the service clock: nothing is that old yet');
    clock.step(29 * day);
    t.same(await kiln.upkeep.evalInputSweep(), { aged: 2, evictedForSize: 0, orphans: 0 }, '31 days on, both are');
    t.same(await blobKeys(kiln), []);
  });

  t.test('over the total, the organizations that hold the most lose their oldest blobs first', async (t) => {
    const hour = 3_600_000;
    const orgs = await kiln.sql<{ id: string; name: string }[]>`select id, name from organizations where name in ('acme', 'small')`;
    const idOf = (name: string) => orgs.find((o) => o.name === name)!.id;
    const put = async (org: string, hex: string, hoursAgo: number) => {
      const key = `eval-inputs/${idOf(org)}/${hex}-test`;
      const used = new Date(clock.now().getTime() - hoursAgo * hour);
      await kiln.nars.blobs.put(key, (async function* () { yield Buffer.alloc(100); })());
      await kiln.sql`insert into eval_input_blobs (organization_id, nar_hash, blob_key, size, created_at, last_used_at)
        values (${idOf(org)}, ${hex}, ${key}, 100, ${used}, ${used})`;
    };
    // acme uploads a lot and recently; small has one input, used five days ago.
    for (const [i, digit] of ['1', '2', '3', '4'].entries()) await put('acme', digit.repeat(64), i + 1);
    await put('small', '9'.repeat(64), 120);
    t.same(await sweepEvalInputs(kiln.sql, kiln.nars.blobs, { maxAgeDays: 30, maxTotalBytes: 300 }, clock.now()), { aged: 0, evictedForSize: 2, orphans: 0 });
    const left = await kiln.sql<{ name: string; nar_hash: string }[]>`
      select o.name, b.nar_hash from eval_input_blobs b join organizations o on o.id = b.organization_id order by o.name, b.nar_hash`;
    t.same(left.map((r) => `${r.name}:${r.nar_hash[0]}`), ['acme:1', 'acme:2', 'small:9'],
      'acme keeps its two newest, small keeps its only one although it is the least recently used of all');
    t.same((await blobKeys(kiln)).length, 3, 'and the evicted blobs are deleted');
  });
});
