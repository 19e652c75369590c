import { execFileSync } from 'node:child_process';
import t from 'tap';
import { startTestKiln } from '../../../support/kiln.js';
import { signUp } from '../../../support/accounts.js';
import { startSshd } from '../../../support/sshd.js';

t.test('build servers: CRUD, active, check-connection over SSH with the organization key', async (t) => {
  // the checks pin host keys: no worker is launched for these servers (the test is about the records)
  const kiln = await startTestKiln(t, { 'build.runOnBuildServers': false });
  await signUp(kiln, 'root');
  const ada = await signUp(kiln, 'ada');
  const bob = await signUp(kiln, 'bob');
  const eve = await signUp(kiln, 'eve');
  await kiln.api('PUT', '/orgs', { token: ada.token, body: { name: 'acme' } });
  await kiln.api('POST', '/orgs/acme/users', { token: ada.token, body: { user: 'bob', role: 'Write' } });
  const sshd = await startSshd(t);

  const created = await kiln.api<{ name: string; host: string; port: number; username: string; active: boolean; architectures: string[] }>('PUT', '/servers/acme', {
    token: ada.token, body: { name: 'box', host: '127.0.0.1', port: sshd.port, username: sshd.username, architectures: ['x86_64-linux'], max_jobs: 4 },
  });
  t.equal(created.status, 200, JSON.stringify(created.message));
  t.match(created.message, { name: 'box', host: '127.0.0.1', port: sshd.port, active: true, architectures: ['x86_64-linux'] });
  t.equal((await kiln.api('PUT', '/servers/acme', { token: ada.token, body: { name: 'box', host: 'h' } })).code, 'server_exists');
  t.equal((await kiln.api('PUT', '/servers/acme', { token: bob.token, body: { name: 'b2', host: 'h' } })).status, 403, 'Write lacks manageServers');
  t.equal((await kiln.api('GET', '/servers/acme', { token: eve.token })).status, 404);
  t.same((await kiln.api<{ name: string }[]>('GET', '/servers/acme', { token: bob.token })).message.map((s) => s.name), ['box']);
  t.equal((await kiln.api('GET', '/servers/acme/box', { token: bob.token })).status, 200);
  t.equal((await kiln.api('GET', '/servers/acme/nope', { token: bob.token })).status, 404);

  t.test('check-connection: refused before the key is authorized, ok after, refused again after regenerate', async (t) => {
    const refused = await kiln.api<{ ok: boolean; reason: string; host_key_fingerprint: string }>('POST', '/servers/acme/box/check-connection', { token: ada.token });
    t.equal(refused.status, 200);
    t.equal(refused.message.ok, false);
    t.match(refused.message.reason, /refused the organization's key/);
    t.match(refused.message.host_key_fingerprint, /^SHA256:/);

    const key = await kiln.api<{ public_key: string }>('GET', '/orgs/acme/ssh', { token: ada.token });
    sshd.authorize([key.message.public_key]);
    const ok = await kiln.api<{ ok: boolean; host_key_fingerprint: string; nix_version: string | null }>('POST', '/servers/acme/box/check-connection', { token: ada.token });
    t.equal(ok.message.ok, true, JSON.stringify(ok.message));
    t.equal(ok.message.host_key_fingerprint, refused.message.host_key_fingerprint);
    t.match(ok.message.nix_version, /nix-store \(Nix\) /, 'runs nix-store --version on the server');

    t.equal((await kiln.api<{ host_key_fingerprint: string }>('GET', '/servers/acme/box', { token: bob.token })).message.host_key_fingerprint,
      ok.message.host_key_fingerprint, 'the check that logged in pinned the key');
    await kiln.api('PUT', '/servers/acme', { token: ada.token, body: { name: 'bare', host: '127.0.0.1', port: sshd.port, username: sshd.username } });
    t.equal((await kiln.api<{ ok: boolean }>('POST', '/servers/acme/bare/check-connection', { token: ada.token })).message.ok, true);
    const system = execFileSync('nix-instantiate', ['--eval', '--expr', 'builtins.currentSystem'], { encoding: 'utf8' }).trim().replace(/"/g, '');
    t.same((await kiln.api<{ architectures: string[] }>('GET', '/servers/acme/bare', { token: ada.token })).message.architectures, [system],
      'a server added without systems gets the one its Nix reports');
    const shown = execFileSync('nix', ['--extra-experimental-features', 'nix-command', 'show-config'], { encoding: 'utf8' });
    const features = /^system-features = (.*)$/m.exec(shown)![1]!.trim().split(/\s+/).sort();
    t.ok(features.length > 0, `this machine's Nix has system features (${features.join(' ')})`);
    t.same((await kiln.api<{ features: string[] }>('GET', '/servers/acme/bare', { token: ada.token })).message.features, features,
      'and the system features its Nix reports (nix show-config), which the scheduler places by');
    await kiln.api('PUT', '/servers/acme', { token: ada.token, body: { name: 'kvm', host: '127.0.0.1', port: sshd.port, username: sshd.username, features: ['kvm'] } });
    t.equal((await kiln.api<{ ok: boolean }>('POST', '/servers/acme/kvm/check-connection', { token: ada.token })).message.ok, true);
    t.same((await kiln.api<{ features: string[] }>('GET', '/servers/acme/kvm', { token: ada.token })).message.features, ['kvm'], 'features an admin set are kept');
    await kiln.api('DELETE', '/servers/acme/kvm', { token: ada.token });
    await kiln.api('DELETE', '/servers/acme/bare', { token: ada.token });
    await kiln.api('POST', '/orgs/acme/ssh', { token: ada.token });
    t.equal((await kiln.api<{ ok: boolean }>('POST', '/servers/acme/box/check-connection', { token: ada.token })).message.ok, false, 'the old key no longer works');
    t.equal((await kiln.api('POST', '/servers/acme/box/check-connection', { token: bob.token })).status, 403);
  });

  t.test('check-connection to a port nobody listens on', async (t) => {
    await kiln.api('PUT', '/servers/acme', { token: ada.token, body: { name: 'dead', host: '127.0.0.1', port: 1 } });
    const res = await kiln.api<{ ok: boolean; reason: string }>('POST', '/servers/acme/dead/check-connection', { token: ada.token });
    t.equal(res.message.ok, false);
    t.match(res.message.reason, /ECONNREFUSED/);
  });

  t.test('update, active, delete', async (t) => {
    const patched = await kiln.api<{ max_jobs: number; features: string[]; host: string }>('PATCH', '/servers/acme/box', { token: ada.token, body: { max_jobs: 8, features: ['kvm'] } });
    t.match(patched.message, { max_jobs: 8, features: ['kvm'], host: '127.0.0.1' });
    t.equal((await kiln.api<{ active: boolean }>('DELETE', '/servers/acme/box/active', { token: ada.token })).message.active, false);
    t.equal((await kiln.api<{ active: boolean }>('POST', '/servers/acme/box/active', { token: ada.token })).message.active, true);
    t.equal((await kiln.api('DELETE', '/servers/acme/box', { token: bob.token })).status, 403);
    t.equal((await kiln.api('DELETE', '/servers/acme/box', { token: ada.token })).status, 200);
  });

  t.test('bad bodies', async (t) => {
    for (const [body, field] of [
      [{ host: 'h' }, 'name'], [{ name: 'x' }, 'host'], [{ name: 'x', host: 'h; rm -rf /' }, 'host'],
      [{ name: 'x', host: 'h', port: 70000 }, 'port'], [{ name: 'x', host: 'h', architectures: ['a b'] }, 'architectures.0'],
      [{ name: 'x', host: 'h', max_jobs: 0 }, 'max_jobs'], [{ name: 'x', host: 'h', username: '' }, 'username'],
      // ssh would read these as its own options (-oProxyCommand…, -E file)
      [{ name: 'x', host: 'h', username: '-Elog' }, 'username'], [{ name: 'x', host: '-oProxyJump' }, 'host'],
    ] as const) {
      const res = await kiln.api('PUT', '/servers/acme', { token: ada.token, body });
      t.equal(res.status, 400);
      t.match(res.message, new RegExp(`^${field.replace('.', '\\.')}: `));
    }
    t.same((await kiln.sql<{ name: string }[]>`select name from servers`).map((r) => r.name), ['dead']);
  });
});

t.test('a build server\'s address obeys outbound.allowedNetworks, as a webhook\'s does', async (t) => {
  const kiln = await startTestKiln(t, { 'outbound.allowedNetworks': [] });
  const ada = await signUp(kiln, 'ada');
  await kiln.api('PUT', '/orgs', { token: ada.token, body: { name: 'acme' } });
  const refused = await kiln.api('PUT', '/servers/acme', { token: ada.token, body: { name: 'box', host: '127.0.0.1', port: 22 } });
  t.equal(refused.code, 'destination_refused');
  t.match(refused.message, /^host: /);
  // A row from before the policy changed: never connected to.
  const [org] = await kiln.sql<{ id: string }[]>`select id from organizations where name = 'acme'`;
  await kiln.sql`insert into servers (organization_id, name, host, port, architectures, host_key) values (${org!.id}, 'old', '127.0.0.1', 22, '{x86_64-linux}', 'ssh-ed25519 AAAA')`;
  await kiln.api('PUT', '/projects/acme', { token: ada.token, body: { name: 'app', repository: 'file:///nonexistent' } });
  const check = await kiln.api<{ ok: boolean; reason: string }>('POST', '/servers/acme/old/check-connection', { token: ada.token });
  t.match(check.message, { ok: false, reason: /^kiln does not connect there: / });
  await kiln.buildServers.refresh();
  t.same(kiln.buildServers.running(), [], 'no worker builds there');
});

t.test('build servers get a worker only with build.runOnBuildServers on (the default: docs/builds.md, "Whose completion")', async (t) => {
  for (const on of [false, true]) {
    const kiln = await startTestKiln(t, on ? {} : { 'build.runOnBuildServers': false });
    const ada = await signUp(kiln, 'ada');
    await kiln.api('PUT', '/orgs', { token: ada.token, body: { name: 'acme' } });
    await kiln.api('PUT', '/projects/acme', { token: ada.token, body: { name: 'app', repository: 'file:///nonexistent' } });
    const [org] = await kiln.sql<{ id: string }[]>`select id from organizations where name = 'acme'`;
    // a server as a successful check leaves it: active, a system, its host key pinned
    const [server] = await kiln.sql<{ id: string }[]>`insert into servers (organization_id, name, host, port, architectures, host_key, host_key_pinned_at)
      values (${org!.id}, 'box', '127.0.0.1', 22, '{x86_64-linux}', 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPmZ5rZ0L8eGSYbwPA3vY3bJ6mXK2kXl8j7rWq9Xz0aB', now()) returning id`;
    await kiln.buildServers.refresh();
    t.same(kiln.buildServers.running(), on ? [server!.id] : [], on ? 'on (the default): the server gets its worker' : 'off: no worker');
    await kiln.buildServers.stop();
  }
});
