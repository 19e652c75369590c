// Two organizations, one real `kiln worker` on one Nix store (docs/builds.md, "The shared store"):
// alpha uploads to its own cache a poisoned P under the very store path beta's derivation needs
// (kiln signs it with alpha's cache key, as it signs any upload); alpha's direct build substitutes
// and uses it. beta's direct build on the same worker must be built with beta's own P, from beta's
// cache: its output's contents say so. Red without the worker's input check (beta's output is
// built from alpha's poison). While alpha's P is held (a GC root), beta's job is given back, queued
// again rather than failed, and it completes once P is free.
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { formatHash, renderNarinfo, storePathHashPart } from '../../../protocol/index.js';
import { startTestKiln } from '../../support/kiln.js';
import { signUp } from '../../support/accounts.js';
import { createTestCache } from '../../support/caches.js';
import { spawnWorker } from '../../support/workerProcess.js';
import { nixEnv, requireNix } from '../../support/nixStore.js';
import { netrcFile, nixOk } from '../../support/nixClient.js';
import { multipartBody, narOfFile } from '../../support/directClosure.js';
import { eventually } from '../../support/eventually.js';

requireNix();

interface Build { build_id: string; status: string; outputs: Record<string, string>; failure: unknown }

t.test('beta\'s build on a worker whose store holds alpha\'s poisoned input uses beta\'s own', { timeout: 240_000 }, async (t) => {
  // two attempts: a failure would be final at the second, a job given back is no failure at all
  const kiln = await startTestKiln(t, { localWorker: true, 'build.maxAttempts': 2, 'build.retryBackoffSecs': 0 });
  const work = mkdtempSync(join(tmpdir(), 'kiln-shared-inputs-'));
  t.teardown(() => rmSync(work, { recursive: true, force: true }));
  const nonce = randomBytes(8).toString('hex');
  writeFileSync(join(work, 'd.nix'), `rec {
    mk = name: script: derivation { inherit name; system = "x86_64-linux"; builder = "/bin/sh"; args = [ "-c" script ]; };
    p = mk "kiln-shared-input" "echo honest-${nonce} > $out";
    a = mk "kiln-shared-alpha" "read x < \${p}; echo alpha-$x > $out";
    b = mk "kiln-shared-beta" "read x < \${p}; echo beta-$x > $out";
  }`);
  const env = nixEnv();
  const run = (command: string, args: string[]) => execFileSync(command, args, { env, encoding: 'utf8', maxBuffer: 1 << 26 }).trim();
  const drv = (attr: string) => run('nix-instantiate', [join(work, 'd.nix'), '-A', attr]);
  const [pDrv, aDrv, bDrv] = [drv('p'), drv('a'), drv('b')];
  const p = run('nix-store', ['--realise', pDrv]);

  const ada = await signUp(kiln, 'ada');
  const bob = await signUp(kiln, 'bob');
  const project = async (token: string, org: string) => {
    t.equal((await kiln.api('PUT', '/orgs', { token, body: { name: org } })).status, 200);
    t.equal((await kiln.api('PUT', `/projects/${org}`, { token, body: { name: 'app', repository: 'file:///nonexistent' } })).status, 200);
    const [row] = await kiln.sql<{ id: string }[]>`select p.id from projects p join organizations o on o.id = p.organization_id where o.name = ${org}`;
    return row!.id;
  };
  const alpha = await createTestCache(kiln.sql, 'alpha', { public: true, ownerId: ada.id });
  const beta = await createTestCache(kiln.sql, 'beta', { public: true, ownerId: bob.id });
  await kiln.sql`insert into subscriptions (project_id, cache_id, mode) values (${await project(ada.token, 'alpha')}, ${alpha.id}, 0)`;
  await kiln.sql`insert into subscriptions (project_id, cache_id, mode) values (${await project(bob.token, 'beta')}, ${beta.id}, 0)`;

  // beta's cache: the honest P; alpha's: other contents under the same store path, as Nix uploads them
  await nixOk('nix', ['copy', '--to', `${kiln.url}/cache/beta`, p], { netrc: netrcFile(bob.token) });
  run('nix-store', ['--delete', p]);
  const nar = narOfFile('poisoned\n');
  const auth = { authorization: `Basic ${Buffer.from(`kiln:${ada.token}`).toString('base64')}` };
  t.equal((await fetch(`${kiln.url}/cache/alpha/nar/poison.nar`, { method: 'PUT', body: nar, headers: auth })).status, 200);
  const narinfo = renderNarinfo({
    storePath: p, url: 'nar/poison.nar', compression: 'none', references: [], sigs: [],
    narHash: formatHash({ algorithm: 'sha256', digest: createHash('sha256').update(nar).digest() }), narSize: nar.length,
  });
  t.equal((await fetch(`${kiln.url}/cache/alpha/${storePathHashPart(p)}.narinfo`, { method: 'PUT', body: narinfo, headers: auth })).status, 200);

  const worker = spawnWorker({ serverUrl: `ws://127.0.0.1:${kiln.port}/proto`, baseDir: join(work, 'worker') });
  t.teardown(() => worker.stop());

  const submit = async (token: string, org: string, drvPath: string) => {
    const closure = run('nix-store', ['-qR', drvPath]).split('\n');
    const exported = execFileSync('nix-store', ['--export', ...closure], { env, maxBuffer: 1 << 26 });
    const { body, contentType } = multipartBody([['project', `${org}/app`], ['closure', exported]]);
    const res = await fetch(`${kiln.url}/api/v1/builds`, { method: 'POST', body, headers: { 'content-type': contentType, authorization: `Bearer ${token}` } });
    const submitted = (await res.json()) as { message: Build };
    t.equal(res.status, 200, JSON.stringify(submitted.message));
    return submitted.message.build_id;
  };
  const ended = async (token: string, buildId: string) => {
    const build = await eventually(async () => (await kiln.api<Build>('GET', `/builds/${buildId}`, { token })).message,
      { until: (b) => ['completed', 'failed', 'substituted'].includes(b.status), timeout: 120_000, interval: 200, message: 'the build ends' });
    t.equal(build.status, 'completed', JSON.stringify(build.failure));
    return readFileSync(build.outputs['out']!, 'utf8');
  };
  const buildFor = async (token: string, org: string, drvPath: string) => ended(token, await submit(token, org, drvPath));

  t.equal(await buildFor(ada.token, 'alpha', aDrv), 'alpha-poisoned\n', 'alpha\'s build uses what alpha\'s cache serves');
  t.equal(readFileSync(p, 'utf8'), 'poisoned\n', 'the worker\'s store holds alpha\'s P');
  // while something else holds alpha's P (a GC root here, another build's input roots in life),
  // the worker gives beta's job back instead of failing it, until it can let go of P
  const held = join(work, 'alpha-holds-p');
  run('nix-store', ['--realise', p, '--add-root', held, '--indirect']);
  const betaBuild = await submit(bob.token, 'beta', bDrv);
  const givenBack = await eventually(async () => (await kiln.api<Build & { attempts: number }>('GET', `/builds/${betaBuild}`, { token: bob.token })).message,
    { until: (b) => b.attempts >= 3 || !['queued', 'started'].includes(b.status), timeout: 60_000, interval: 200, message: 'beta\'s job is given back' });
  t.match(givenBack, { status: /^(queued|started)$/, failure: null }, 'given back and queued again, not failed');
  t.equal(readFileSync(p, 'utf8'), 'poisoned\n', 'what alpha holds stays');
  rmSync(held);
  t.equal(await ended(bob.token, betaBuild), `beta-honest-${nonce}\n`, 'beta\'s build on the same worker completes, with beta\'s P');
});
