// The SSH server's connection limits with a real OpenSSH client and raw sockets, on a stepped
// clock: ssh.loginGraceSecs drops a connection that has not logged in in time (one that sent
// nothing at all, one that stopped after the version line), never one that logged in. A key's
// last_used_at moves only on a verified signature, not on an unsigned publickey query. On a
// dual-stack listener an IPv4 peer (::ffff:127.0.0.1) matches an API key's allowed_ips 127.0.0.1/32.
// Password attempts are rate limited per address; ssh.maxSessionsPerUser caps a user's sessions.
// A login checked again at each session: a key deleted or an API key revoked after it logged in
// opens no more sessions on the connection it left open (an OpenSSH ControlMaster).
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { generateSshKeyPair } from '../../../services/organizations/sshKeys.js';
import { signUp } from '../../support/accounts.js';
import { createTestCache } from '../../support/caches.js';
import { steppedClock } from '../../support/clock.js';
import { startTestKiln, type TestKiln } from '../../support/kiln.js';
import { kilnSshOptions } from '../../support/kilnSsh.js';

const dir = mkdtempSync(join(tmpdir(), 'kiln-ssh-connections-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

const sshOptions = (kiln: TestKiln, identity: string): string[] => kilnSshOptions(kiln, dir, identity);

/** Waits for `condition` (a bound that only stops a hung test, not a measurement). */
async function until(what: string, condition: () => boolean, limitMs = 20_000): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`gave up waiting: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** A TCP connection to kiln's SSH port that has received the server's version line. */
async function rawConnection(kiln: TestKiln): Promise<{ socket: Socket; closed: () => boolean }> {
  const socket = connect(kiln.sshPort!, '127.0.0.1');
  let received = '';
  let closed = false;
  socket.on('data', (d: Buffer) => (received += d.toString('latin1')));
  socket.on('error', () => undefined);
  socket.on('close', () => (closed = true));
  await until('the server\'s version line', () => received.startsWith('SSH-2.0-kiln'));
  return { socket, closed: () => closed };
}

/** Runs `ssh` to its end (the server is in this process: never spawnSync). */
function runSsh(args: string[]): Promise<{ status: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('ssh', args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (status) => resolve({ status, stderr }));
  });
}

/** `ssh -N` logged in as `identity`: a connection with no session, kept open until killed. */
async function loggedIn(kiln: TestKiln, identity: string, cache: string): Promise<ChildProcess> {
  const child = spawn('ssh', ['-v', '-N', ...sshOptions(kiln, identity), `${cache}@127.0.0.1`], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  await until('ssh to log in', () => /Authenticated to/.test(stderr) || child.exitCode !== null);
  if (child.exitCode !== null) throw new Error(`ssh exited:\n${stderr}`);
  return child;
}

/** A kiln on a stepped clock with `options`, ada owning the public cache "main", and her login key at `identity`. */
async function kilnWithLogin(t: Parameters<typeof startTestKiln>[0], options: Parameters<typeof startTestKiln>[1], keyFileName: string) {
  const clock = steppedClock(new Date('2026-11-26T12:00:00Z'));
  const kiln = await startTestKiln(t, { 'ssh.enable': true, 'ssh.port': 0, 'ssh.listenAddresses': ['127.0.0.1'], ...options }, { clock });
  const ada = await signUp(kiln, 'ada');
  await createTestCache(kiln.sql, 'main', { public: true, ownerId: ada.id });
  const pair = generateSshKeyPair('ada');
  const identity = join(dir, keyFileName);
  writeFileSync(identity, pair.privateKey, { mode: 0o600 });
  const added = await kiln.api('POST', '/user/ssh-keys', { token: ada.token, body: { name: 'k', public_key: pair.publicKey } });
  if (added.status !== 200) throw new Error(`registering the key: ${JSON.stringify(added.message)}`);
  return { clock, kiln, ssh: kiln.ssh!, identity };
}

t.test('ssh.loginGraceSecs', async (t) => {
  const { clock, kiln, ssh, identity } = await kilnWithLogin(t, { 'ssh.loginGraceSecs': 60 }, 'id_ada');

  const silent = await rawConnection(kiln);
  const greeted = await rawConnection(kiln);
  greeted.socket.write('SSH-2.0-OpenSSH_9.2\r\n'); // the version line, then nothing: no key exchange, no login
  const client = await loggedIn(kiln, identity, 'main');
  t.teardown(() => client.kill());

  clock.step(59_000);
  t.equal(ssh.sweepConnections(), 0, 'within the grace nothing is dropped');
  clock.step(2_000);
  t.equal(ssh.sweepConnections(), 2, 'past it the two connections that did not log in are dropped');
  await until('the dropped sockets to close', () => silent.closed() && greeted.closed());
  t.pass('their sockets are closed');

  clock.step(600_000);
  t.equal(ssh.sweepConnections(), 0, 'a logged-in connection is never dropped for the grace');
  t.equal(client.exitCode, null, 'ssh stays connected');
});

t.test('ssh.idleTimeoutSecs drops a logged-in connection the client has left silent', async (t) => {
  const { clock, kiln, ssh, identity } = await kilnWithLogin(t, { 'ssh.idleTimeoutSecs': 600 }, 'id_idle');

  const quiet = await loggedIn(kiln, identity, 'main');
  t.teardown(() => quiet.kill());
  // ServerAliveInterval: this client sends a keepalive every second of real time, so it is never silent for long.
  const chatty = spawn('ssh', ['-vvv', '-N', '-o', 'ServerAliveInterval=1', ...sshOptions(kiln, identity), 'main@127.0.0.1'], { stdio: ['ignore', 'ignore', 'pipe'] });
  t.teardown(() => chatty.kill());
  let chattyLog = '';
  chatty.stderr!.on('data', (d: Buffer) => (chattyLog += d.toString()));
  await until('the chatty ssh to log in', () => /Authenticated to/.test(chattyLog));
  const quietExit = new Promise<number | null>((resolve) => quiet.once('exit', resolve));

  clock.step(599_000);
  t.equal(ssh.sweepConnections(), 0, 'within the timeout nothing is dropped');
  // the chatty client's next keepalive arrives after this step, the quiet one sends nothing
  clock.step(2_000);
  // (a keepalive is a global request, SSH message 80; the server's answer, 81 or 82, is what shows
  // the server has read it: -vvv logs that answer as it arrives)
  const answered = () => (chattyLog.match(/receive packet: type 8[12]/g) ?? []).length;
  const before = answered();
  await until('the server answered a keepalive of the chatty client after the step', () => answered() > before);
  t.equal(ssh.sweepConnections(), 1, 'past it the silent logged-in connection is dropped');
  t.not(await quietExit, null, 'its ssh ends');
  t.equal(chatty.exitCode, null, 'a client that keeps talking stays connected');
});

t.test('last_used_at: only a verified signature is a use of a key', async (t) => {
  const kiln = await startTestKiln(t, { 'ssh.enable': true, 'ssh.port': 0, 'ssh.listenAddresses': ['127.0.0.1'] });
  const ada = await signUp(kiln, 'ada');
  await createTestCache(kiln.sql, 'main', { public: true, ownerId: ada.id });
  const pair = generateSshKeyPair('ada');
  t.equal((await kiln.api('POST', '/user/ssh-keys', { token: ada.token, body: { name: 'k', public_key: pair.publicKey } })).status, 200);
  const lastUsed = async () => (await kiln.sql<{ last_used_at: Date | null }[]>`select last_used_at from user_ssh_keys`)[0]!.last_used_at;

  // Anyone may hold the public half: ssh offers it (an unsigned query), hears it would do, and has no private key to sign with.
  const probe = join(dir, 'id_probe');
  writeFileSync(`${probe}.pub`, `${pair.publicKey}\n`);
  const probed = await runSsh([...sshOptions(kiln, `${probe}.pub`), '-v', 'main@127.0.0.1', 'true']);
  t.not(probed.status, 0, 'the holder of the public key alone is refused');
  t.match(probed.stderr, /Server accepts key/, 'after the server answered the unsigned query');
  t.equal(await lastUsed(), null, 'the query did not mark the key used');

  const identity = join(dir, 'id_ada2');
  writeFileSync(identity, pair.privateKey, { mode: 0o600 });
  const login = await runSsh([...sshOptions(kiln, identity), 'main@127.0.0.1', 'true']);
  t.match(login.stderr, /kiln serves only/, 'the signed login got in (and was told what kiln serves)');
  // the use is recorded after the login is accepted, not before: wait for it (a bound, not a measurement)
  let used: Date | null = null;
  const deadline = Date.now() + 20_000;
  while ((used = await lastUsed()) === null && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
  t.ok(used, 'a signed login marks it used');
});

/** `ssh … true` logging in with `secret` as the password, `prompts` times; its stderr. */
function passwordSsh(kiln: TestKiln, secret: string, prompts = 1): Promise<string> {
  const askpass = join(dir, `askpass-${Math.random().toString(36).slice(2)}.sh`);
  writeFileSync(askpass, `#!/bin/sh\necho '${secret}'\n`, { mode: 0o700 });
  // ssh takes the first value of an option: these come before sshOptions' BatchMode=yes
  const opts = ['-o', 'PubkeyAuthentication=no', '-o', 'PreferredAuthentications=password', '-o', 'BatchMode=no', '-o', `NumberOfPasswordPrompts=${prompts}`, ...sshOptions(kiln, '/dev/null')];
  return new Promise<string>((resolve, reject) => {
    const child = spawn('ssh', [...opts, 'main@127.0.0.1', 'true'], { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, SSH_ASKPASS: askpass, SSH_ASKPASS_REQUIRE: 'force', DISPLAY: ':0' } });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', () => resolve(stderr));
  });
}

t.test('password attempts are rate limited per address (20 at once, one more every 3 s)', async (t) => {
  let now = Date.parse('2026-11-26T12:00:00Z');
  const kiln = await startTestKiln(t, { 'ssh.enable': true, 'ssh.port': 0, 'ssh.listenAddresses': ['127.0.0.1'] }, { rateLimitClock: { now: () => now } });
  const ada = await signUp(kiln, 'ada');
  await createTestCache(kiln.sql, 'main', { public: true, ownerId: ada.id });
  const key = await kiln.api<{ secret: string }>('POST', '/user/keys', { token: ada.token, body: { name: 'ssh', permissions: ['viewCache'] } });
  t.equal(key.status, 200);
  for (let i = 0; i < 4; i++) t.match(await passwordSsh(kiln, 'SVC-wrong', 5), /Permission denied/, 'five wrong passwords');
  t.match(await passwordSsh(kiln, key.message.secret), /Permission denied/, 'after 20 attempts even the right key is refused');
  now += 3_000;
  t.match(await passwordSsh(kiln, key.message.secret), /kiln serves only/, '3 s later one more attempt is allowed, and it logs in');
  t.match(await passwordSsh(kiln, key.message.secret), /Permission denied/, 'and only one');
});

t.test('an IPv4 peer on a dual-stack listener matches allowed_ips', async (t) => {
  const kiln = await startTestKiln(t, { 'ssh.enable': true, 'ssh.port': 0, 'ssh.listenAddresses': ['::'] });
  const ada = await signUp(kiln, 'ada');
  await createTestCache(kiln.sql, 'main', { public: true, ownerId: ada.id });
  const passwordLogin = async (allowed: string[]) => {
    const key = await kiln.api<{ secret: string }>('POST', '/user/keys', { token: ada.token, body: { name: `k${allowed.join()}`, permissions: ['viewCache'], allowed_ips: allowed } });
    t.equal(key.status, 200, JSON.stringify(key.message));
    return passwordSsh(kiln, key.message.secret);
  };
  t.match(await passwordLogin(['127.0.0.1/32']), /kiln serves only/, 'a key allowed from 127.0.0.1 logs in over ::ffff:127.0.0.1');
  t.match(await passwordLogin(['10.0.0.0/8']), /Permission denied/, 'a key allowed elsewhere does not');
});

t.test('ssh.maxSessionsPerUser', async (t) => {
  const kiln = await startTestKiln(t, { 'ssh.enable': true, 'ssh.port': 0, 'ssh.listenAddresses': ['127.0.0.1'], 'ssh.maxSessionsPerUser': 1 });
  const ada = await signUp(kiln, 'ada');
  await createTestCache(kiln.sql, 'main', { public: true, ownerId: ada.id });
  const pair = generateSshKeyPair('ada');
  const identity = join(dir, 'id_cap');
  writeFileSync(identity, pair.privateKey, { mode: 0o600 });
  t.equal((await kiln.api('POST', '/user/ssh-keys', { token: ada.token, body: { name: 'k', public_key: pair.publicKey } })).status, 200);

  // A daemon session waiting for the client's greeting holds the one slot.
  const holder = spawn('ssh', [...sshOptions(kiln, identity), 'main@127.0.0.1', 'nix-daemon', '--stdio'], { stdio: ['pipe', 'ignore', 'ignore'] });
  t.teardown(() => holder.kill());
  let second = '';
  const deadline = Date.now() + 20_000;
  // until the holder's session runs, the second one may still get in (a bound, not a measurement)
  while (!/maxSessionsPerUser/.test(second) && Date.now() < deadline) second = (await runSsh([...sshOptions(kiln, identity), 'main@127.0.0.1', 'true'])).stderr;
  t.match(second, /1 SSH sessions running, the most ssh\.maxSessionsPerUser allows/, 'a second session is refused with a message');
  holder.kill();
  let third = '';
  const again = Date.now() + 20_000;
  while (!/kiln serves only/.test(third) && Date.now() < again) third = (await runSsh([...sshOptions(kiln, identity), 'main@127.0.0.1', 'true'])).stderr;
  t.match(third, /kiln serves only/, 'once the first ended a session runs again');
});

t.test('a login that no longer holds opens no more sessions on its open connection', async (t) => {
  const kiln = await startTestKiln(t, { 'ssh.enable': true, 'ssh.port': 0, 'ssh.listenAddresses': ['127.0.0.1'] });
  const ada = await signUp(kiln, 'ada');
  await createTestCache(kiln.sql, 'main', { public: true, ownerId: ada.id });
  const pair = generateSshKeyPair('ada');
  const identity = join(dir, 'id_master');
  writeFileSync(identity, pair.privateKey, { mode: 0o600 });
  t.equal((await kiln.api('POST', '/user/ssh-keys', { token: ada.token, body: { name: 'laptop', public_key: pair.publicKey } })).status, 200);

  /** One connection kept open by OpenSSH's ControlMaster; sessions through it log in no more. */
  const master = async (name: string, extra: string[], env: NodeJS.ProcessEnv = process.env) => {
    const socket = join(dir, `master-${name}`);
    const child = spawn('ssh', [...extra, '-M', '-S', socket, '-N', ...sshOptions(kiln, identity), 'main@127.0.0.1'], { stdio: ['ignore', 'ignore', 'pipe'], env });
    t.teardown(() => child.kill());
    let up = false;
    const deadline = Date.now() + 20_000;
    while (!up && Date.now() < deadline) up = (await runSsh(['-S', socket, '-O', 'check', 'main@127.0.0.1'])).status === 0;
    t.ok(up, `the ${name} connection is up`);
    return (command: string[]) => runSsh(['-S', socket, '-o', 'ControlMaster=no', ...sshOptions(kiln, identity), 'main@127.0.0.1', ...command]);
  };
  const serve = ['nix-store', '--serve'];

  const byKey = await master('key', []);
  t.notMatch((await byKey(serve)).stderr, /no longer holds/, 'a session of the key login runs');
  t.equal((await kiln.api('DELETE', '/user/ssh-keys?name=laptop', { token: ada.token })).status, 200);
  t.match((await byKey(serve)).stderr, /this login no longer holds \(its SSH key was removed/, 'once the key is deleted, the open connection opens no session');

  const key = await kiln.api<{ secret: string }>('POST', '/user/keys', { token: ada.token, body: { name: 'ci', permissions: ['viewCache'] } });
  t.equal(key.status, 200);
  const askpass = join(dir, 'askpass-master.sh');
  writeFileSync(askpass, `#!/bin/sh\necho '${key.message.secret}'\n`, { mode: 0o700 });
  const byPassword = await master('password', ['-o', 'PubkeyAuthentication=no', '-o', 'PreferredAuthentications=password', '-o', 'BatchMode=no'],
    { ...process.env, SSH_ASKPASS: askpass, SSH_ASKPASS_REQUIRE: 'force', DISPLAY: ':0' });
  t.notMatch((await byPassword(serve)).stderr, /no longer holds/, 'a session of the API key login runs');
  t.equal((await kiln.api('DELETE', '/user/keys?name=ci', { token: ada.token })).status, 200);
  t.match((await byPassword(serve)).stderr, /this login no longer holds/, 'once the API key is revoked, the open connection opens no session');
});
