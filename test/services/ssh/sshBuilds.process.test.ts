// Builds over SSH go into kiln's farm, with the real Nix and OpenSSH clients and a real
// `kiln worker`: `nix build --store ssh-ng://CACHE@kiln --eval-store auto` (BuildPaths of
// `drv!out`) and `nix-build --builders 'ssh-ng://CACHE@kiln x86_64-linux' -j0` (BuildDerivation;
// also over `ssh://`, the serve protocol) each become a direct build of the project that writes into the cache; the client sees the
// build's log (and the logs of inputs the farm builds first, not those done already: a `--builders`
// client has its inputs built first, and their logs are not shown twice), the output lands in the
// cache, and the build is listed with its log in the API.
// A derivation whose .drv the cache lacks is refused with what to do; a reader cannot build. With
// two projects writing into the cache, `remote-program='nix-daemon --project ORG/PROJECT'` names one.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import t from 'tap';
import { startTestKiln, type TestKiln } from '../../support/kiln.js';
import { kilnSshOptions } from '../../support/kilnSsh.js';
import { signUp } from '../../support/accounts.js';
import { addCacheMember, createTestCache } from '../../support/caches.js';
import { spawnWorker } from '../../support/workerProcess.js';
import { requireNix } from '../../support/nixStore.js';
import { nixOk, runNix } from '../../support/nixClient.js';
import { generateSshKeyPair } from '../../../services/organizations/sshKeys.js';

requireNix();

const dir = mkdtempSync(join(tmpdir(), 'kiln-ssh-builds-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

interface Build { build_id: string; drv_path: string; status: string; outputs: Record<string, string> }

/** A derivation file with a fresh nonce: `top` needs `dep`, both run /bin/sh. */
function freshDerivation(name: string): { file: string; nonce: string } {
  const nonce = randomBytes(8).toString('hex');
  const file = join(dir, `${name}.nix`);
  writeFileSync(file, `let
    mk = name: script: derivation { inherit name; system = "x86_64-linux"; builder = "/bin/sh"; args = [ "-c" script ]; PATH = "/bin:/usr/bin"; };
    dep = mk "${name}-dep" "echo building dep ${nonce}; echo ${nonce} > $out";
  in mk "${name}-top" "echo building top ${nonce}; cat \${dep} > $out"`);
  return { file, nonce };
}

t.test('builds over ssh-ng run on kiln\'s workers', { timeout: 280_000 }, async (t) => {
  const kiln: TestKiln = await startTestKiln(t, { localWorker: true, 'ssh.enable': true, 'ssh.port': 0, 'ssh.listenAddresses': ['127.0.0.1'] });
  const ada = await signUp(kiln, 'ada');
  const bob = await signUp(kiln, 'bob');
  const keyOf = async (who: typeof ada, name: string) => {
    const pair = generateSshKeyPair(name);
    const file = join(dir, `id_${name}`);
    writeFileSync(file, pair.privateKey, { mode: 0o600 });
    t.equal((await kiln.api('POST', '/user/ssh-keys', { token: who.token, body: { name: 'k', public_key: pair.publicKey } })).status, 200);
    return file;
  };
  const adaKey = await keyOf(ada, 'ada');
  const bobKey = await keyOf(bob, 'bob');
  const carol = await signUp(kiln, 'carol');
  const carolKey = await keyOf(carol, 'carol');
  t.equal((await kiln.api('PUT', '/orgs', { token: ada.token, body: { name: 'acme' } })).status, 200);
  t.equal((await kiln.api('PUT', '/projects/acme', { token: ada.token, body: { name: 'app', repository: 'file:///nonexistent' } })).status, 200);
  const [project] = await kiln.sql<{ id: string }[]>`select id from projects where name = 'app'`;
  const cache = await createTestCache(kiln.sql, 'main', { public: true, ownerId: ada.id });
  await kiln.sql`insert into subscriptions (project_id, cache_id, mode) values (${project!.id}, ${cache.id}, 0)`;
  await addCacheMember(kiln.sql, cache.id, bob.id, 'View');
  // carol may write into the cache, but is no member of acme: she may not build in its project
  await addCacheMember(kiln.sql, cache.id, carol.id, 'Write');

  const worker = spawnWorker({ serverUrl: `ws://127.0.0.1:${kiln.port}/proto`, baseDir: join(dir, 'worker') });
  t.teardown(() => worker.stop());
  const sshEnv = (identity: string) => ({ env: { NIX_SSHOPTS: kilnSshOptions(kiln, dir, identity).join(' ') } });
  const directBuilds = async () => (await kiln.api<Build[]>('GET', '/builds/direct/recent', { token: ada.token })).message;

  await t.test('nix build --store ssh-ng:// (BuildPaths of drv!out) builds in the farm', async (t) => {
    const { file, nonce } = freshDerivation('kiln-ssh-store');
    const run = await runNix('nix', ['build', '--store', 'ssh-ng://main@127.0.0.1', '--eval-store', 'auto', '-f', file, '--json', '-L'], sshEnv(adaKey));
    t.equal(run.status, 0, run.stderr);
    const [built] = JSON.parse(run.stdout) as { drvPath: string; outputs: { out: string } }[];
    t.match(run.stderr, new RegExp(`building top ${nonce}`), 'the client saw the build\'s log');
    t.match(run.stderr, new RegExp(`building dep ${nonce}[^]*building top ${nonce}`), 'and before it the log of the input the farm built first');
    const listed = (await directBuilds()).find((b) => b.drv_path === built!.drvPath);
    t.ok(listed, 'the build is in the direct-builds list');
    t.equal(listed?.status, 'completed');
    t.equal(listed?.outputs['out'], built!.outputs.out, 'with the output the client was told of');
    const narinfo = await fetch(`${kiln.url}/cache/main/${built!.outputs.out.slice(11, 43)}.narinfo`);
    t.equal(narinfo.status, 200, 'the output is in the cache');
    const log = await fetch(`${kiln.url}/api/v1/builds/${listed!.build_id}/log`, { headers: { authorization: `Bearer ${ada.token}` } });
    t.match(await log.text(), new RegExp(`building top ${nonce}`), 'the API has its log');
  });

  await t.test('nix-build --builders ssh-ng:// -j0 (BuildDerivation) builds in the farm', async (t) => {
    const { file, nonce } = freshDerivation('kiln-ssh-builder');
    // The client's own store is apart from the worker's (they share this machine's /nix/store otherwise).
    const client = join(dir, 'client-store');
    const store = ['--store', client];
    const instantiated = (await nixOk('nix', ['eval', ...store, '--raw', '-f', file, 'drvPath'], sshEnv(adaKey))).trim();
    const builders = ['--option', 'builders', 'ssh-ng://main@127.0.0.1 x86_64-linux', '--option', 'builders-use-substitutes', 'false'];

    const refused = await runNix('nix-build', [...store, ...builders, '-j0', '--no-out-link', file], sshEnv(adaKey));
    t.not(refused.status, 0, 'without the .drv in the cache the build is refused');
    t.match(refused.stderr, /does not hold .*\.drv: copy it first/, 'naming what to do');

    await nixOk('nix', ['copy', '--from', client, '--to', 'ssh-ng://main@127.0.0.1', '--derivation', instantiated], sshEnv(adaKey));
    const run = await runNix('nix-build', [...store, ...builders, '-j0', '--no-out-link', file], sshEnv(adaKey));
    t.equal(run.status, 0, run.stderr);
    const out = run.stdout.trim();
    t.match(run.stderr, new RegExp(`building top ${nonce}`), 'the client saw the build\'s log');
    t.equal((await nixOk('nix-store', [...store, '--query', '--hash', out], {})).trim().startsWith('sha256:'), true, 'the output arrived in the client\'s store');
    const listed = (await directBuilds()).find((b) => b.drv_path === instantiated);
    t.equal(listed?.status, 'completed', 'the build is in the direct-builds list');
    // The client built the input first (its own BuildDerivation): the root's build does not show it again.
    t.equal(run.stderr.split(`building dep ${nonce}`).length - 1, 1, 'the input\'s log was shown once', { stderr: run.stderr });
    t.notMatch(run.stderr, /kiln: building input/, 'the root\'s build names no input to build: its input was done');
  });

  await t.test('nix-build --builders ssh:// -j0 (the serve protocol\'s BuildDerivation) builds in the farm', async (t) => {
    const { file, nonce } = freshDerivation('kiln-serve-builder');
    const client = join(dir, 'serve-client-store');
    const store = ['--store', client];
    const instantiated = (await nixOk('nix', ['eval', ...store, '--raw', '-f', file, 'drvPath'], sshEnv(adaKey))).trim();
    await nixOk('nix', ['copy', '--from', client, '--to', 'ssh-ng://main@127.0.0.1', '--derivation', instantiated], sshEnv(adaKey));
    const builders = ['--option', 'builders', 'ssh://main@127.0.0.1 x86_64-linux', '--option', 'builders-use-substitutes', 'false'];
    const run = await runNix('nix-build', [...store, ...builders, '-j0', '--no-out-link', file], sshEnv(adaKey));
    t.equal(run.status, 0, run.stderr);
    t.match(run.stderr, new RegExp(`building top ${nonce}`), 'the client saw the build\'s log (on the session\'s stderr)');
    t.ok((await nixOk('nix-store', [...store, '--query', '--hash', run.stdout.trim()], {})).startsWith('sha256:'), 'the output arrived in the client\'s store');
    const listed = (await directBuilds()).find((b) => b.drv_path === instantiated);
    t.equal(listed?.status, 'completed', 'the build is in the direct-builds list');
  });

  await t.test('a reader of the cache cannot build into it', async (t) => {
    const { file } = freshDerivation('kiln-ssh-reader');
    const run = await runNix('nix', ['build', '--store', 'ssh-ng://main@127.0.0.1', '--eval-store', 'auto', '-f', file, '--json'], sshEnv(bobKey));
    t.not(run.status, 0);
    t.match(run.stderr, /writeStore/);
  });

  await t.test('a writer of the cache who may not build in its project cannot build', async (t) => {
    const { file } = freshDerivation('kiln-ssh-carol');
    const run = await runNix('nix', ['build', '--store', 'ssh-ng://main@127.0.0.1', '--eval-store', 'auto', '-f', file, '--json'], sshEnv(carolKey));
    t.not(run.status, 0);
    t.match(run.stderr, /no project you may build in .* writes into cache "main"/);
    t.notOk((await directBuilds()).some((b) => b.drv_path.includes('kiln-ssh-carol')), 'no build was made');
  });

  // Last: from here on two of ada's projects write into the cache.
  await t.test('with several projects writing into the cache, remote-program\'s --project picks one', async (t) => {
    t.equal((await kiln.api('PUT', '/projects/acme', { token: ada.token, body: { name: 'lib', repository: 'file:///nonexistent' } })).status, 200);
    const [lib] = await kiln.sql<{ id: string }[]>`select id from projects where name = 'lib'`;
    await kiln.sql`insert into subscriptions (project_id, cache_id, mode) values (${lib!.id}, ${cache.id}, 2)`;
    const projectOf = async (drvPath: string) => {
      const [row] = await kiln.sql<{ project: string }[]>`
        select o.name || '/' || p.name as project from builds b join derivation_builds db on db.id = b.derivation_build_id
        join derivations d on d.id = db.derivation_id join evaluations e on e.id = b.evaluation_id join tasks k on k.id = e.task_id
        join projects p on p.id = k.project_id join organizations o on o.id = p.organization_id
        where d.drv_path = ${drvPath} and b.id in (select build_id from unnest(${(await directBuilds()).map((b) => b.build_id)}::uuid[]) as build_id)`;
      return row?.project ?? null;
    };
    const build = (name: string, storeUrl: string) => runNix('nix', ['build', '--store', storeUrl, '--eval-store', 'auto', '-f', freshDerivation(name).file, '--json'], sshEnv(adaKey));

    const unnamed = await build('kiln-ssh-unnamed', 'ssh-ng://main@127.0.0.1');
    t.not(unnamed.status, 0, 'two projects and none named: refused');
    t.match(unnamed.stderr, /several projects you may build in write into cache "main" \(acme\/app, acme\/lib\): name one with remote-program/);

    const named = await build('kiln-ssh-named', `ssh-ng://main@127.0.0.1?remote-program=${encodeURIComponent('nix-daemon --project acme/lib')}`);
    t.equal(named.status, 0, named.stderr);
    const [built] = JSON.parse(named.stdout) as { drvPath: string }[];
    t.equal(await projectOf(built!.drvPath), 'acme/lib', 'the build is the named project\'s');

    const other = await build('kiln-ssh-other', `ssh-ng://main@127.0.0.1?remote-program=${encodeURIComponent('nix-daemon --project acme/nowhere')}`);
    t.not(other.status, 0, 'a project that does not write into the cache is refused');
    t.match(other.stderr, /project "acme\/nowhere" does not write into cache "main"/);
  });
});
