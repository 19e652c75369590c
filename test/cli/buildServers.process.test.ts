// Build servers as builders (docs/builds.md, "Build servers"), end to end with real OpenSSH and
// real Nix: the "server" is this test's sshd on loopback whose logins run Nix against a store of
// its own (a chroot store under a temporary directory, so nothing it builds lands in this
// machine's store but through kiln's copy back). No /proto worker runs: the project's builds
// go to the organization's build server, through the worker kiln runs for it.
import { execFileSync, spawnSync } from 'node:child_process';
import type { LookupAddress } from 'node:dns';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { randomBytes } from 'node:crypto';
import t from 'tap';
import { startTestKiln, type TestKiln } from '../support/kiln.js';
import { signUp } from '../support/accounts.js';
import { createTestCache } from '../support/caches.js';
import { startSshd } from '../support/sshd.js';
import { nixEnv, requireNix } from '../support/nixStore.js';
import { multipartBody } from '../support/directClosure.js';
import { eventually } from '../support/eventually.js';
import { TEST_NIX_CONFIG } from '../support/workerProcess.js';

requireNix();

interface Build { build_id: string; drv_path: string; status: string; outputs: Record<string, string>; failure: { reason: string; message: string } | null }
type Check = { ok: boolean; host_key_fingerprint: string; host_key_changed: boolean; reason?: string };

/**
 * A derivation (with an input derivation unless `alone`), instantiated in this machine's store;
 * its closure as `nix-store --export` writes it.
 */
function derivationClosure(work: string, nonce: string, alone = false, depNonce = nonce): { drv: string; exported: Buffer } {
  writeFileSync(join(work, `${nonce}.nix`), `let
    mk = name: script: derivation { inherit name; system = "x86_64-linux"; builder = "/bin/sh"; args = [ "-c" script ]; PATH = "/bin:/usr/bin"; };
    dep = mk "kiln-bs-dep-${depNonce}" "echo building dep; echo ${depNonce} > $out";
  in mk "kiln-bs-top-${nonce}" "echo building top on the server; ${alone ? 'echo alone' : 'cat \${dep}'} > $out"`);
  const env = nixEnv();
  const drv = execFileSync('nix-instantiate', [join(work, `${nonce}.nix`)], { env }).toString().trim();
  const closure = execFileSync('nix-store', ['-qR', drv], { env }).toString().trim().split('\n');
  return { drv, exported: execFileSync('nix-store', ['--export', ...closure], { env, maxBuffer: 1 << 26 }) };
}

/** Whether the path is valid in this machine's store. */
const hostValid = (path: string): boolean => spawnSync('nix-store', ['--check-validity', path], { env: nixEnv() }).status === 0;

async function submit(kiln: TestKiln, token: string, exported: Buffer, project = 'acme/app'): Promise<Build> {
  const { body, contentType } = multipartBody([['project', project], ['closure', exported]]);
  const res = await fetch(`${kiln.url}/api/v1/builds`, { method: 'POST', body, headers: { 'content-type': contentType, authorization: `Bearer ${token}` } });
  const submitted = (await res.json()) as { message: Build };
  if (res.status !== 200) throw new Error(JSON.stringify(submitted));
  return eventually(async () => (await kiln.api<Build>('GET', `/builds/${submitted.message.build_id}`, { token })).message,
    { until: (b) => ['completed', 'failed', 'substituted'].includes(b.status), timeout: 150_000, interval: 250, message: 'the build ends' });
}

t.test('an organization\'s build server builds its projects\' derivations; a changed host key is refused until re-checked', { timeout: 400_000 }, async (t) => {
  // The workers kiln starts inherit this process's Nix settings, as they would a service's.
  const saved = { remote: process.env['NIX_REMOTE'], config: process.env['NIX_CONFIG'] };
  process.env['NIX_REMOTE'] = 'local';
  process.env['NIX_CONFIG'] = TEST_NIX_CONFIG;
  t.teardown(() => {
    for (const [name, value] of [['NIX_REMOTE', saved.remote], ['NIX_CONFIG', saved.config]] as const) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  });
  // One attempt per build: the refused build fails at once instead of waiting for its retry.
  // The server is known by a name only this DNS answers: ssh cannot resolve it, so a build that
  // reaches the server went to the address kiln checked.
  const dns = new Map<string, string>([['box.test', '127.0.0.1']]);
  const resolve = (name: string): Promise<LookupAddress[]> => {
    const address = dns.get(name);
    return address === undefined ? Promise.reject(Object.assign(new Error(`no such name ${name}`), { code: 'ENOTFOUND' })) : Promise.resolve([{ address, family: 4 }]);
  };
  const kiln = await startTestKiln(t, { 'build.runOnBuildServers': true, 'build.maxAttempts': 1, 'build.inputsUnavailableMaxLoops': 1, 'build.retryBackoffSecs': 1 }, { resolve });
  const work = mkdtempSync(join(tmpdir(), 'kiln-build-server-'));
  t.teardown(() => rmSync(work, { recursive: true, force: true }));

  // The server: every login runs its command with Nix on a store of its own, and is recorded.
  const remoteRoot = join(work, 'remote');
  const commands = join(work, 'commands');
  const login = join(work, 'login.sh');
  writeFileSync(login, [
    '#!/bin/sh',
    `echo "$SSH_ORIGINAL_COMMAND" >> ${commands}`,
    `export NIX_REMOTE='local?root=${remoteRoot}'`,
    "export NIX_CONFIG='build-users-group =\nsandbox = false\nextra-sandbox-paths = /bin /lib /lib64 /usr\nsubstituters ='",
    'exec /bin/sh -c "$SSH_ORIGINAL_COMMAND"', '',
  ].join('\n'));
  chmodSync(login, 0o755);
  const sshd = await startSshd(t);

  const { token } = await signUp(kiln, 'ada');
  await kiln.api('PUT', '/orgs', { token, body: { name: 'acme' } });
  t.equal((await kiln.api('PUT', '/projects/acme', { token, body: { name: 'app', repository: 'file:///nonexistent' } })).status, 200);
  const [project] = await kiln.sql<{ id: string }[]>`select id from projects where name = 'app'`;
  const cache = await createTestCache(kiln.sql, 'main', { public: true });
  await kiln.sql`insert into subscriptions (project_id, cache_id, mode) values (${project!.id}, ${cache.id}, 0)`;
  const orgKey = (await kiln.api<{ public_key: string }>('GET', '/orgs/acme/ssh', { token })).message.public_key;
  sshd.authorize([`command="${login}" ${orgKey}`]);
  const created = await kiln.api<{ id: string; host_key_fingerprint: string | null }>('PUT', '/servers/acme', {
    token, body: { name: 'box', host: 'box.test', port: sshd.port, username: sshd.username, architectures: ['x86_64-linux'], max_jobs: 2 },
  });
  t.equal(created.message.host_key_fingerprint, null, 'nothing is pinned before a check');
  await kiln.buildServers.refresh();
  t.same(kiln.buildServers.running(), [], 'an unchecked server gets no worker');

  const first = await kiln.api<Check>('POST', '/servers/acme/box/check-connection', { token });
  t.match(first.message, { ok: true, host_key_changed: false });
  const pinned = await kiln.api<{ host_key_fingerprint: string; host_key_pinned_at: string }>('GET', '/servers/acme/box', { token });
  t.equal(pinned.message.host_key_fingerprint, first.message.host_key_fingerprint, 'the first successful check pins the key');
  await kiln.buildServers.refresh();
  t.same(kiln.buildServers.running(), [created.message.id]);

  const firstNonce = randomBytes(6).toString('hex');
  t.test('the build runs on the server: inputs copied there, built there, outputs in the cache, log via the API', async (t) => {
    const { drv, exported } = derivationClosure(work, firstNonce);
    const build = await submit(kiln, token, exported);
    t.equal(build.status, 'completed', JSON.stringify(build.failure));
    t.equal(build.drv_path, drv);
    const out = build.outputs['out']!;
    t.ok(existsSync(join(remoteRoot, out)), 'the output was built in the server\'s store');
    // What the server sent back is valid in its worker's own store only, never in this machine's,
    // where the local worker and other organizations' build servers would take it as built.
    t.notOk(hostValid(out), 'the server\'s output is not valid in this machine\'s store');
    t.ok(existsSync(join(kiln.baseDir, 'build-servers', created.message.id, 'store', out)), 'it is in the store of the server\'s worker');
    t.match(readFileSync(commands, 'utf8'), /nix-store --serve --write/, 'Nix reached the server over SSH');
    t.equal((await fetch(`${kiln.url}/cache/main/${basename(out).slice(0, 32)}.narinfo`)).status, 200, 'the output is in the project\'s cache');
    const log = await fetch(`${kiln.url}/api/v1/builds/${build.build_id}/log`, { headers: { authorization: `Bearer ${token}` } });
    t.match(await log.text(), /building top on the server/);
    const [worker] = await kiln.sql<{ worker_id: string }[]>`select worker_id from worker_connections where disconnected_at is null`;
    t.equal(worker?.worker_id, created.message.id, 'the build server\'s worker, and no other');
  });

  t.test('a changed host key refuses builds with a clear error; a re-check accepts the new key', async (t) => {
    await sshd.rotateHostKey();
    const refused = await submit(kiln, token, derivationClosure(work, randomBytes(6).toString('hex'), true).exported);
    t.equal(refused.status, 'failed');
    t.match(refused.failure, { reason: 'network', message: /host key is not the one kiln pinned.*check-connection/s });

    const recheck = await kiln.api<Check>('POST', '/servers/acme/box/check-connection', { token });
    t.match(recheck.message, { ok: true, host_key_changed: true });
    t.not(recheck.message.host_key_fingerprint, first.message.host_key_fingerprint);
    t.equal((await kiln.api<{ host_key_fingerprint: string }>('GET', '/servers/acme/box', { token })).message.host_key_fingerprint, recheck.message.host_key_fingerprint);
    await kiln.buildServers.refresh();
    const accepted = await submit(kiln, token, derivationClosure(work, randomBytes(6).toString('hex')).exported);
    t.equal(accepted.status, 'completed', JSON.stringify(accepted.failure));
  });

  t.test('DNS rebinding: a name that now resolves to a refused address is not connected to', async (t) => {
    t.same(kiln.buildServers.running(), [created.message.id]);
    dns.set('box.test', '10.9.9.9');
    const check = await kiln.api<Check>('POST', '/servers/acme/box/check-connection', { token });
    t.match(check.message, { ok: false, reason: /^kiln does not connect there: box\.test resolves to 10\.9\.9\.9/ });
    await kiln.buildServers.refresh();
    t.same(kiln.buildServers.running(), [], 'the worker stops: its next connection would go to the name\'s new address');
    dns.set('box.test', '127.0.0.1');
    await kiln.buildServers.refresh();
    t.same(kiln.buildServers.running(), [created.message.id], 'back on an allowed address, it runs again');
  });
});
