// kiln's SSH server with the real clients (Debian's nix-bin 2.8 and OpenSSH's ssh): `nix copy
// --to ssh-ng://CACHE@kiln` of a closure, substitution of it over HTTP and over ssh-ng into fresh
// stores with signatures required, the permission refusals (unknown key, no writeStore, private
// cache without view), API keys as the password, and broken sessions that store nothing.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { startTestKiln, type TestKiln } from '../../support/kiln.js';
import { kilnSshOptions, runWithInput } from '../../support/kilnSsh.js';
import { signUp, type TestAccount } from '../../support/accounts.js';
import { addCacheMember, createTestCache } from '../../support/caches.js';
import { buildFixturePaths } from '../../support/nixStore.js';
import { makeTestNar } from '../../support/narStorage.js';
import { freshStore, nixOk, runNix } from '../../support/nixClient.js';
import { generateSshKeyPair } from '../../../services/organizations/sshKeys.js';
import { STDERR_LAST, WORKER_MAGIC_1, wireString, wireStrings, wireU64 } from '../../../protocol/index.js';

const dir = mkdtempSync(join(tmpdir(), 'kiln-ssh-test-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

/** A private key file for `ssh -i`, and its public line for /user/ssh-keys. */
function keyFile(name: string): { file: string; publicKey: string } {
  const pair = generateSshKeyPair(name);
  const file = join(dir, `id_${name}`);
  writeFileSync(file, pair.privateKey, { mode: 0o600 });
  return { file, publicKey: pair.publicKey };
}

const sshOptions = (kiln: TestKiln, identity: string, extra: string[] = []): string[] => kilnSshOptions(kiln, dir, identity, extra);

const sshEnv = (kiln: TestKiln, identity: string) => ({ env: { NIX_SSHOPTS: sshOptions(kiln, identity).join(' ') } });

/** Runs `ssh … CACHE@127.0.0.1 nix-daemon --stdio` with `input` as its whole stdin. */
function rawSession(kiln: TestKiln, identity: string, cache: string, input: Buffer): Promise<{ status: number; stdout: Buffer; stderr: string }> {
  return runWithInput('ssh', [...sshOptions(kiln, identity), `${cache}@127.0.0.1`, 'nix-daemon', '--stdio'], input);
}

const pathsIn = async (kiln: TestKiln, cacheId: string): Promise<string[]> =>
  (await kiln.sql<{ store_path: string }[]>`
    select p.store_path from path_signatures s join cached_paths p on p.id = s.cached_path_id where s.cache_id = ${cacheId}`).map((r) => r.store_path).sort();

t.test('ssh-ng:// with the real Nix and OpenSSH clients', async (t) => {
  const kiln = await startTestKiln(t, { 'ssh.enable': true, 'ssh.port': 0, 'ssh.listenAddresses': ['127.0.0.1'] });
  t.ok(kiln.sshPort, 'the SSH server listens');
  const ada: TestAccount = await signUp(kiln, 'ada');
  const bob: TestAccount = await signUp(kiln, 'bob');
  const adaKey = keyFile('ada');
  const bobKey = keyFile('bob');
  const strangerKey = keyFile('stranger');
  for (const [who, key] of [[ada, adaKey], [bob, bobKey]] as const) {
    const added = await kiln.api('POST', '/user/ssh-keys', { token: who.token, body: { name: 'laptop', public_key: key.publicKey } });
    t.equal(added.status, 200, JSON.stringify(added.message));
  }
  const fixtures = buildFixturePaths();
  const closure = [fixtures.file, fixtures.refs, fixtures.tree, fixtures.symlink, fixtures.executable, fixtures.empty];
  const shared = await createTestCache(kiln.sql, 'shared', { public: true, ownerId: ada.id });
  const secret = await createTestCache(kiln.sql, 'secret', { public: false, ownerId: ada.id });
  const trust = (key: string) => ['--option', 'trusted-public-keys', key, '--option', 'require-sigs', 'true'];

  t.test('/user/ssh-keys lists, refuses bad and duplicate keys, deletes', async (t) => {
    const listed = await kiln.api<{ name: string; fingerprint: string }[]>('GET', '/user/ssh-keys', { token: ada.token });
    t.equal(listed.status, 200);
    t.same(listed.message.map((k) => k.name), ['laptop']);
    t.match(listed.message[0]!.fingerprint, /^SHA256:/);
    const bad = await kiln.api('POST', '/user/ssh-keys', { token: ada.token, body: { name: 'bad', public_key: 'ssh-ed25519 not-base64' } });
    t.equal(bad.status, 400);
    t.match(bad.message, /public_key/);
    const again = await kiln.api('POST', '/user/ssh-keys', { token: bob.token, body: { name: 'stolen', public_key: adaKey.publicKey } });
    t.equal(again.status, 409, 'a key registered by someone else is refused');
    const extra = keyFile('extra');
    t.equal((await kiln.api('POST', '/user/ssh-keys', { token: ada.token, body: { name: 'extra', public_key: extra.publicKey } })).status, 200);
    t.equal((await kiln.api('DELETE', '/user/ssh-keys?name=extra', { token: ada.token })).status, 200);
    t.equal((await kiln.api('DELETE', '/user/ssh-keys?name=extra', { token: ada.token })).status, 404);
    const gone = await runNix('nix', ['store', 'ping', '--store', 'ssh-ng://shared@127.0.0.1'], sshEnv(kiln, extra.file));
    t.not(gone.status, 0, 'a deleted key logs in no more');
  });

  t.test('nix copy --to ssh-ng://, then substitution over HTTP and over ssh-ng', async (t) => {
    await nixOk('nix', ['copy', '--to', 'ssh-ng://shared@127.0.0.1', ...closure], sshEnv(kiln, adaKey.file));
    t.same(await pathsIn(kiln, shared.id), [...closure].sort(), 'every path of the closure is in the cache');

    const overHttp = freshStore();
    await nixOk('nix', ['copy', '--from', `${kiln.url}/cache/shared`, '--to', overHttp, ...trust(shared.publicKey), ...closure]);
    const verified = await runNix('nix', ['store', 'verify', '--store', overHttp, ...trust(shared.publicKey), ...closure]);
    t.equal(verified.status, 0, `signed by the cache key, substituted over HTTP:\n${verified.stderr}`);

    const overSsh = freshStore();
    await nixOk('nix', ['copy', '--from', 'ssh-ng://shared@127.0.0.1', '--to', overSsh, ...trust(shared.publicKey), ...closure], sshEnv(kiln, bobKey.file));
    const verifiedSsh = await runNix('nix', ['store', 'verify', '--store', overSsh, ...trust(shared.publicKey), ...closure]);
    t.equal(verifiedSsh.status, 0, `signed by the cache key, copied over ssh-ng:\n${verifiedSsh.stderr}`);

    const asSubstituter = freshStore();
    await nixOk('nix-store', ['-r', '--store', asSubstituter, '--option', 'substituters', 'ssh-ng://shared@127.0.0.1', ...trust(shared.publicKey), fixtures.refs], sshEnv(kiln, bobKey.file));
    const verifiedSub = await runNix('nix', ['store', 'verify', '--store', asSubstituter, ...trust(shared.publicKey), fixtures.refs, fixtures.file]);
    t.equal(verifiedSub.status, 0, `substituted from ssh-ng with its reference:\n${verifiedSub.stderr}`);

    const untrusted = await runNix('nix', ['copy', '--from', 'ssh-ng://shared@127.0.0.1', '--to', freshStore(), ...trust('other-1:3REoSjvMtmBzmoRZVZPZuB/MG/vyNbytXCID+0ocOAA='), fixtures.file], sshEnv(kiln, bobKey.file));
    t.not(untrusted.status, 0, 'a client not trusting the cache key refuses its paths');

    const again = await runNix('nix', ['copy', '--to', 'ssh-ng://shared@127.0.0.1', ...closure], sshEnv(kiln, adaKey.file));
    t.equal(again.status, 0, `copying again finds everything there:\n${again.stderr}`);
  });

  t.test('refusals: unknown key, no writeStore, private cache without view, unknown cache', async (t) => {
    const stranger = await runNix('nix', ['store', 'ping', '--store', 'ssh-ng://shared@127.0.0.1'], sshEnv(kiln, strangerKey.file));
    t.not(stranger.status, 0, 'an unregistered key cannot log in');
    t.match(stranger.stderr, /Permission denied/);

    const noWrite = await runNix('nix', ['copy', '--to', 'ssh-ng://secret@127.0.0.1', fixtures.file], sshEnv(kiln, bobKey.file));
    t.not(noWrite.status, 0, 'bob sees nothing of the private cache');
    t.match(noWrite.stderr, /no cache "secret"/);
    await addCacheMember(kiln.sql, secret.id, bob.id, 'View');
    const viewOnly = await runNix('nix', ['copy', '--to', 'ssh-ng://secret@127.0.0.1', fixtures.file], sshEnv(kiln, bobKey.file));
    t.not(viewOnly.status, 0, 'View on a cache does not write to it');
    t.match(viewOnly.stderr, /writeStore/);
    t.same(await pathsIn(kiln, secret.id), [], 'nothing was stored');

    const publicNoWrite = await runNix('nix', ['copy', '--to', 'ssh-ng://shared@127.0.0.1', fixtures.executable], sshEnv(kiln, bobKey.file));
    t.equal(publicNoWrite.status, 0, 'a path the cache has needs no upload');

    await nixOk('nix', ['copy', '--to', 'ssh-ng://secret@127.0.0.1', fixtures.file], sshEnv(kiln, adaKey.file));
    const carol = await signUp(kiln, 'carol');
    const carolKey = keyFile('carol');
    await kiln.api('POST', '/user/ssh-keys', { token: carol.token, body: { name: 'k', public_key: carolKey.publicKey } });
    const unreadable = await runNix('nix', ['copy', '--from', 'ssh-ng://secret@127.0.0.1', '--to', freshStore(), ...trust(secret.publicKey), fixtures.file], sshEnv(kiln, carolKey.file));
    t.not(unreadable.status, 0, 'a private cache is not readable without view');
    const readable = await runNix('nix', ['copy', '--from', 'ssh-ng://secret@127.0.0.1', '--to', freshStore(), ...trust(secret.publicKey), fixtures.file], sshEnv(kiln, bobKey.file));
    t.equal(readable.status, 0, `with View it is:\n${readable.stderr}`);
  });

  t.test('an API key as the password', async (t) => {
    const key = await kiln.api<{ secret: string }>('POST', '/user/keys', { token: ada.token, body: { name: 'ssh', permissions: ['viewCache'] } });
    t.equal(key.status, 200, JSON.stringify(key.message));
    const askpass = join(dir, 'askpass.sh');
    writeFileSync(askpass, `#!/bin/sh\necho '${key.message.secret}'\n`, { mode: 0o700 });
    const opts = sshOptions(kiln, '/dev/null', ['-o', 'PubkeyAuthentication=no', '-o', 'PreferredAuthentications=password', '-o', 'BatchMode=no', '-o', 'NumberOfPasswordPrompts=1']);
    const env = { NIX_SSHOPTS: opts.join(' '), SSH_ASKPASS: askpass, SSH_ASKPASS_REQUIRE: 'force', DISPLAY: ':0' };
    const read = await runNix('nix', ['copy', '--from', 'ssh-ng://secret@127.0.0.1', '--to', freshStore(), ...trust(secret.publicKey), fixtures.file], { env });
    t.equal(read.status, 0, `the key reads:\n${read.stderr}`);
    const write = await runNix('nix', ['copy', '--to', 'ssh-ng://secret@127.0.0.1', fixtures.tree], { env });
    t.not(write.status, 0, 'a key without writeStore does not write, whatever its owner may');
    t.match(write.stderr, /writeStore/);
  });

  t.test('ssh:// (the legacy serve protocol): copy to, copy from, substitute, refusals', async (t) => {
    const legacy = await createTestCache(kiln.sql, 'legacy', { public: true, ownerId: ada.id });
    await nixOk('nix', ['copy', '--to', 'ssh://legacy@127.0.0.1', ...closure], sshEnv(kiln, adaKey.file));
    t.same(await pathsIn(kiln, legacy.id), [...closure].sort(), 'every path of the closure is in the cache');

    const copied = freshStore();
    await nixOk('nix', ['copy', '--from', 'ssh://legacy@127.0.0.1', '--to', copied, ...trust(legacy.publicKey), ...closure], sshEnv(kiln, bobKey.file));
    const verified = await runNix('nix', ['store', 'verify', '--store', copied, ...trust(legacy.publicKey), ...closure]);
    t.equal(verified.status, 0, `signed by the cache key, copied over ssh://:\n${verified.stderr}`);

    const substituted = freshStore();
    await nixOk('nix-store', ['-r', '--store', substituted, '--option', 'substituters', 'ssh://legacy@127.0.0.1', ...trust(legacy.publicKey), fixtures.refs], sshEnv(kiln, bobKey.file));
    const verifiedSub = await runNix('nix', ['store', 'verify', '--store', substituted, ...trust(legacy.publicKey), fixtures.refs, fixtures.file]);
    t.equal(verifiedSub.status, 0, `substituted from ssh:// with its reference:\n${verifiedSub.stderr}`);

    const other = await createTestCache(kiln.sql, 'legacy-ro', { public: true, ownerId: ada.id });
    const refused = await runNix('nix', ['copy', '--to', 'ssh://legacy-ro@127.0.0.1', fixtures.file], sshEnv(kiln, bobKey.file));
    t.not(refused.status, 0, 'no writeStore, no copy');
    t.match(refused.stderr, /writeStore/);
    t.same(await pathsIn(kiln, other.id), [], 'nothing was stored');
    const unreadable = await runNix('nix', ['copy', '--from', 'ssh://secret@127.0.0.1', '--to', freshStore(), ...trust(secret.publicKey), fixtures.file], sshEnv(kiln, strangerKey.file));
    t.not(unreadable.status, 0, 'an unknown key reads nothing');
  });

  t.test('broken sessions: garbage, an unsupported operation, a NAR cut short', async (t) => {
    const before = await pathsIn(kiln, shared.id);
    const garbage = await rawSession(kiln, adaKey.file, 'shared', Buffer.from('GET / HTTP/1.1\r\n\r\n'));
    t.not(garbage.status, 0, 'garbage ends the session');

    const hello = Buffer.concat([wireU64(WORKER_MAGIC_1), wireU64((1 << 8) | 34), wireU64(0), wireU64(0)]);
    const unsupported = await rawSession(kiln, adaKey.file, 'shared', Buffer.concat([hello, wireU64(14 /* FindRoots */)]));
    t.match(unsupported.stdout.toString('latin1'), /does not support operation 14/, 'an unsupported operation gets the protocol\'s error');

    const addArgs = Buffer.concat([
      wireU64(39), wireString('/nix/store/00000000000000000000000000000000-cut-short'), wireString(''),
      wireString('0'.repeat(64)), wireStrings([]), wireU64(0), wireU64(200_120), wireU64(0), wireStrings([]), wireString(''), wireU64(0), wireU64(0),
      wireU64(65536), Buffer.alloc(1000),
    ]);
    const cut = await rawSession(kiln, adaKey.file, 'shared', Buffer.concat([hello, addArgs]));
    t.not(cut.status, 0, 'a client gone mid-NAR ends the session');
    t.same(await pathsIn(kiln, shared.id), before, 'nothing was stored half');

    // AddMultipleToStore (1.32): one framed stream of a count and, per path, its info and NAR.
    const pathInfo = (name: string, narSize: number) => Buffer.concat([
      wireString(`/nix/store/00000000000000000000000000000000-${name}`), wireString(''), wireString('0'.repeat(64)), wireStrings([]),
      wireU64(0), wireU64(narSize), wireU64(0), wireStrings([]), wireString(''),
    ]);
    const framed = (body: Buffer) => Buffer.concat([wireU64(body.length), body, wireU64(0)]);
    const multiple = (body: Buffer) => Buffer.concat([hello, wireU64(44), wireU64(0), wireU64(0), framed(body)]);
    const overCount = await rawSession(kiln, adaKey.file, 'shared', multiple(Buffer.concat([wireU64(2), pathInfo('only-one', 16), Buffer.alloc(16)])));
    t.not(overCount.status, 0, 'a stream that ends before the paths it announced ends the session');
    const cutMultiple = await rawSession(kiln, adaKey.file, 'shared', Buffer.concat([hello, wireU64(44), wireU64(0), wireU64(0), wireU64(4096), pathInfo('cut', 200_000), Buffer.alloc(100)]));
    t.not(cutMultiple.status, 0, 'a client gone mid-stream ends the session');
    const trailing = await rawSession(kiln, adaKey.file, 'shared', multiple(Buffer.concat([wireU64(0), Buffer.alloc(8, 1)])));
    t.not(trailing.status, 0, 'bytes after the announced paths end the session');
    const empty = await rawSession(kiln, adaKey.file, 'shared', multiple(wireU64(0)));
    t.same(empty.stdout.subarray(-8), wireU64(STDERR_LAST), 'while a stream of no paths is answered with STDERR_LAST');
    t.same(await pathsIn(kiln, shared.id), before, 'none of them stored anything');
    const ping = await runNix('nix', ['store', 'ping', '--store', 'ssh-ng://shared@127.0.0.1'], sshEnv(kiln, adaKey.file));
    t.equal(ping.status, 0, `the server still serves:\n${ping.stderr}`);
  });

  t.test('AddMultipleToStore: a refusal mid-stream answers the error and keeps the paths before it', async (t) => {
    const hello = Buffer.concat([wireU64(WORKER_MAGIC_1), wireU64((1 << 8) | 34), wireU64(0), wireU64(0)]);
    const kept = await createTestCache(kiln.sql, 'batched', { public: true, ownerId: ada.id });
    const nars = await Promise.all([1, 2].map((n) => makeTestNar(t, { data: `kept ${n}\n` }, [], `kept-${n}`)));
    const infoOf = (storePath: string, narHash: string, nar: Buffer) => Buffer.concat([
      wireString(storePath), wireString(''), wireString(narHash), wireStrings([]), wireU64(0), wireU64(nar.length), wireU64(0), wireStrings([]), wireString(''), nar,
    ]);
    const body = Buffer.concat([
      wireU64(3),
      ...nars.map((n) => infoOf(n.info.storePath, n.info.narHash, n.nar)),
      infoOf('/nix/store/00000000000000000000000000000000-refused', 'not-a-hash', nars[0]!.nar),
    ]);
    const session = await rawSession(kiln, adaKey.file, 'batched', Buffer.concat([hello, wireU64(44), wireU64(0), wireU64(0), wireU64(body.length), body, wireU64(0)]));
    t.match(session.stdout.toString('latin1'), /narHash/, 'the refusal is answered naming narHash');
    t.same(await pathsIn(kiln, kept.id), nars.map((n) => n.info.storePath).sort(), 'the paths before it are stored');
  });

  t.test('AddMultipleToStore: the storage limit counts the stream\'s paths not yet committed (no overshoot by a batch)', async (t) => {
    const hello = Buffer.concat([wireU64(WORKER_MAGIC_1), wireU64((1 << 8) | 34), wireU64(0), wireU64(0)]);
    const limited = await createTestCache(kiln.sql, 'limited', { public: true, ownerId: ada.id });
    const nars = await Promise.all([1, 2, 3].map((n) => makeTestNar(t, { data: `limited ${n}\n` }, [], `limited-${n}`)));
    // room for two of the three NARs (by NarSize, as each path's check counts), all three in one batch
    const narSize = nars[0]!.nar.length;
    await kiln.sql`update caches set max_storage_bytes = ${Math.floor(narSize * 2.5)} where id = ${limited.id}`;
    const infoOf = (storePath: string, narHash: string, nar: Buffer) => Buffer.concat([
      wireString(storePath), wireString(''), wireString(narHash), wireStrings([]), wireU64(0), wireU64(nar.length), wireU64(0), wireStrings([]), wireString(''), nar,
    ]);
    const body = Buffer.concat([wireU64(3), ...nars.map((n) => infoOf(n.info.storePath, n.info.narHash, n.nar))]);
    const session = await rawSession(kiln, adaKey.file, 'limited', Buffer.concat([hello, wireU64(44), wireU64(0), wireU64(0), wireU64(body.length), body, wireU64(0)]));
    t.match(session.stdout.toString('latin1'), /bytes left/, 'the path past the limit is refused');
    t.equal((await pathsIn(kiln, limited.id)).length, 2, 'two paths fit, the third is not stored');
  });
});
