// Whose completion, end to end (docs/builds.md, "Build servers: whose completion"), with real
// OpenSSH and real Nix: organization acme's build server is hostile. Its builds see a file only
// it has (this machine's builders run unsandboxed, so the file stands for anything a server may
// return), and it returns an output with content of its choosing for a derivation that
// organization beta also builds. beta's evaluation of the same closure must not take acme's
// server's completion as built: the shared worker builds both derivations again for beta, beta's
// cache receives honest outputs, and nothing of acme's server's reaches beta's build.
import { execFileSync } from 'node:child_process';
import type { LookupAddress } from 'node:dns';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import t from 'tap';
import { startTestKiln, type TestKiln } from '../support/kiln.js';
import { signUp } from '../support/accounts.js';
import { createTestCache } from '../support/caches.js';
import { startSshd } from '../support/sshd.js';
import { nixEnv, requireNix } from '../support/nixStore.js';
import { multipartBody } from '../support/directClosure.js';
import { eventually } from '../support/eventually.js';
import { spawnWorker, TEST_NIX_CONFIG } from '../support/workerProcess.js';

requireNix();

interface Build { build_id: string; evaluation_id: string; drv_path: string; status: string; outputs: Record<string, string>; failure: unknown }

async function submit(kiln: TestKiln, token: string, exported: Buffer, project: string): Promise<Build> {
  const { body, contentType } = multipartBody([['project', project], ['closure', exported]]);
  const res = await fetch(`${kiln.url}/api/v1/builds`, { method: 'POST', body, headers: { 'content-type': contentType, authorization: `Bearer ${token}` } });
  const submitted = (await res.json()) as { message: Build };
  if (res.status !== 200) throw new Error(JSON.stringify(submitted));
  const build = await eventually(async () => (await kiln.api<Build>('GET', `/builds/${submitted.message.build_id}`, { token })).message,
    { until: (b) => ['completed', 'failed', 'substituted'].includes(b.status), timeout: 150_000, interval: 250, message: 'the build ends' });
  await eventually(async () => (await kiln.api<{ phase: string }>('GET', `/evals/${build.evaluation_id}`, { token })).message,
    { until: (e) => e.phase !== 'building', timeout: 30_000, interval: 200, message: 'the evaluation ends' });
  return build;
}

const narHashIn = async (kiln: TestKiln, cache: string, path: string): Promise<string | null> => {
  const res = await fetch(`${kiln.url}/cache/${cache}/${path.slice(11, 43)}.narinfo`);
  return res.status === 200 ? /^NarHash: (.*)$/m.exec(await res.text())![1]! : null;
};

t.test('a hostile build server\'s completion is never another organization\'s input', { timeout: 400_000 }, async (t) => {
  const saved = { remote: process.env['NIX_REMOTE'], config: process.env['NIX_CONFIG'], bound: process.env['SERVICE_WORKER_STORE_ROOT_MAX_MB'] };
  process.env['NIX_REMOTE'] = 'local';
  process.env['NIX_CONFIG'] = TEST_NIX_CONFIG;
  // The server's worker collects its own store after every build (worker.storeRootMaxMb 0).
  process.env['SERVICE_WORKER_STORE_ROOT_MAX_MB'] = '0';
  t.teardown(() => {
    for (const [name, value] of [['NIX_REMOTE', saved.remote], ['NIX_CONFIG', saved.config], ['SERVICE_WORKER_STORE_ROOT_MAX_MB', saved.bound]] as const) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  });
  const resolve = (name: string): Promise<LookupAddress[]> =>
    name === 'box.test' ? Promise.resolve([{ address: '127.0.0.1', family: 4 }]) : Promise.reject(Object.assign(new Error(`no such name ${name}`), { code: 'ENOTFOUND' }));
  const kiln = await startTestKiln(t, { localWorker: true, 'build.runOnBuildServers': true, 'build.maxAttempts': 1, 'build.inputsUnavailableMaxLoops': 1, 'build.retryBackoffSecs': 1 }, { resolve });
  const work = mkdtempSync(join(tmpdir(), 'kiln-build-server-tenants-'));
  t.teardown(() => rmSync(work, { recursive: true, force: true }));

  // acme's server, on a store of its own
  const remoteRoot = join(work, 'remote');
  const forgeDir = join(work, 'forge-dir');
  mkdirSync(forgeDir);
  const login = join(work, 'login.sh');
  writeFileSync(login, [
    '#!/bin/sh',
    `export NIX_REMOTE='local?root=${remoteRoot}'`,
    // a chroot store builds in a chroot: the forge's directory is in it, as the shell is
    `export NIX_CONFIG='build-users-group =\nsandbox = false\nextra-sandbox-paths = /bin /lib /lib64 /usr ${forgeDir}\nsubstituters ='`,
    'exec /bin/sh -c "$SSH_ORIGINAL_COMMAND"', '',
  ].join('\n'));
  chmodSync(login, 0o755);
  const sshd = await startSshd(t);

  const ada = await signUp(kiln, 'ada');
  const bob = await signUp(kiln, 'bob');
  for (const [who, org] of [[ada, 'acme'], [bob, 'beta']] as const) {
    t.equal((await kiln.api('PUT', '/orgs', { token: who.token, body: { name: org } })).status, 200);
    t.equal((await kiln.api('PUT', `/projects/${org}`, { token: who.token, body: { name: 'app', repository: 'file:///nonexistent' } })).status, 200);
    const [project] = await kiln.sql<{ id: string }[]>`select p.id from projects p join organizations o on o.id = p.organization_id where o.name = ${org}`;
    const cache = await createTestCache(kiln.sql, `${org}-main`, { public: true });
    await kiln.sql`insert into subscriptions (project_id, cache_id, mode) values (${project!.id}, ${cache.id}, 0)`;
  }
  const orgKey = (await kiln.api<{ public_key: string }>('GET', '/orgs/acme/ssh', { token: ada.token })).message.public_key;
  sshd.authorize([`command="${login}" ${orgKey}`]);
  const server = await kiln.api<{ id: string }>('PUT', '/servers/acme', {
    token: ada.token, body: { name: 'box', host: 'box.test', port: sshd.port, username: sshd.username, architectures: ['x86_64-linux'], max_jobs: 2 },
  });
  t.match((await kiln.api('POST', '/servers/acme/box/check-connection', { token: ada.token })).message, { ok: true });
  await kiln.buildServers.refresh();
  t.same(kiln.buildServers.running(), [server.message.id], 'on by default: acme\'s server gets its worker');

  // One closure both organizations build: top reads dep. dep's builder writes what the forge file
  // says when it exists, and only acme's server's builds ever see it.
  const nonce = randomBytes(6).toString('hex');
  const forge = join(forgeDir, 'forge');
  writeFileSync(join(work, 'd.nix'), `let
    mk = name: script: derivation { inherit name; system = "x86_64-linux"; builder = "/bin/sh"; args = [ "-c" script ]; PATH = "/bin:/usr/bin"; };
    dep = mk "kiln-tenant-dep-${nonce}" "if [ -e ${forge} ]; then cat ${forge} > $out; else echo honest ${nonce} > $out; fi";
  in mk "kiln-tenant-top-${nonce}" "cat \${dep} > $out"`);
  const env = nixEnv();
  const drv = execFileSync('nix-instantiate', [join(work, 'd.nix')], { env }).toString().trim();
  const closure = execFileSync('nix-store', ['-qR', drv], { env }).toString().trim().split('\n');
  const exported = execFileSync('nix-store', ['--export', ...closure], { env, maxBuffer: 1 << 26 });

  writeFileSync(forge, 'forged by acme\'s build server\n');
  const acmeBuild = await submit(kiln, ada.token, exported, 'acme/app');
  rmSync(forge);
  t.equal(acmeBuild.status, 'completed', JSON.stringify(acmeBuild.failure));
  const top = acmeBuild.outputs['out']!;
  t.match(readFileSync(join(remoteRoot, top), 'utf8'), /forged/, 'acme\'s server built it, with its own content');
  const forgedHash = await narHashIn(kiln, 'acme-main', top);
  t.ok(forgedHash, 'acme\'s cache holds what its server returned (acme trusts its own server)');
  // worker.storeRootMaxMb: once pushed, what the server sent back leaves its worker's own store
  const ownStore = join(kiln.baseDir, 'build-servers', server.message.id, 'store');
  await eventually(async () => existsSync(join(ownStore, top)), { until: (present) => !present, timeout: 60_000, interval: 250, message: 'the server worker\'s own store is collected' });
  t.notOk(existsSync(join(ownStore, top)), 'the server\'s output is collected from its worker\'s own store after the push');

  // beta has no server: the shared worker (open mode, on this machine's store) builds for it
  const shared = spawnWorker({ serverUrl: `ws://127.0.0.1:${kiln.port}/proto`, baseDir: join(work, 'worker') });
  t.teardown(() => shared.stop());
  const betaBuild = await submit(kiln, bob.token, exported, 'beta/app');
  t.equal(betaBuild.status, 'completed', JSON.stringify(betaBuild.failure));
  t.equal(betaBuild.outputs['out'], top, 'the same derivation');
  const workers = await kiln.sql<{ name: string; worker_id: string }[]>`
    select d.name, db.worker_id from derivation_builds db join derivations d on d.id = db.derivation_id where d.drv_path = any(${closure.filter((p) => p.endsWith('.drv'))})`;
  t.equal(workers.length, 2);
  for (const { name, worker_id: workerId } of workers) t.not(workerId, server.message.id, `${name} was built again, not by acme's server`);
  t.equal(readFileSync(top, 'utf8'), `honest ${nonce}\n`, 'beta\'s build read the honest dep: acme\'s output never became its input');
  const betaHash = await narHashIn(kiln, 'beta-main', top);
  t.ok(betaHash, 'beta\'s cache received the output');
  t.not(betaHash, forgedHash, 'and it is not what acme\'s server returned');
  const [row] = await kiln.sql<{ done_for: string[] | null }[]>`select db.done_for from derivation_builds db join derivations d on d.id = db.derivation_id where d.drv_path = ${drv}`;
  t.equal(row!.done_for, null, 'built by kiln\'s own worker: done for every tenant from now on');
});
