// The serve protocol's ImportPaths (`ssh://`; what clients before serve protocol 2.5 and Hydra's
// queue runner send): a closure exported by the real `nix-store --export`, sent over the real
// OpenSSH client to `nix-store --serve --write` on kiln, lands in the cache signed by the cache
// key and is substituted from it by the real Nix. (Nix 2.8 itself sends AddToStoreNar to a 2.7
// server, so the session's few protocol bytes are the test's own.) Hostile streams store nothing:
// not the export format, a NAR that does not parse, a missing export magic, a reference the NAR
// does not hold, a client gone mid-NAR, no writeStore, no --write.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { EXPORT_MAGIC, wireString, wireStrings, wireU64 } from '../../../protocol/index.js';
import { generateSshKeyPair } from '../../../services/organizations/sshKeys.js';
import { signUp } from '../../support/accounts.js';
import { createTestCache } from '../../support/caches.js';
import { startTestKiln, type TestKiln } from '../../support/kiln.js';
import { kilnSshOptions, runWithInput } from '../../support/kilnSsh.js';
import { freshStore, nixOk, runNix } from '../../support/nixClient.js';
import { buildFixturePaths, NIX_OPTIONS, nixEnv } from '../../support/nixStore.js';
import { makeTestNar, type TestNar } from '../../support/narStorage.js';

const dir = mkdtempSync(join(tmpdir(), 'kiln-ssh-import-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

const SERVE_MAGIC_1 = 0x390c9deb;
const SERVE_MAGIC_2 = 0x5452eecb;
const IMPORT_PATHS = 4;
/** What a client of serve protocol 2.4 (before AddToStoreNar) greets with. */
const hello = Buffer.concat([wireU64(SERVE_MAGIC_1), wireU64((2 << 8) | 4)]);

/** A private key file for `ssh -i`, and its public line for /user/ssh-keys. */
function keyFile(name: string): { file: string; publicKey: string } {
  const pair = generateSshKeyPair(name);
  const file = join(dir, `id_${name}`);
  writeFileSync(file, pair.privateKey, { mode: 0o600 });
  return { file, publicKey: pair.publicKey };
}

/** Runs a command with Nix's environment, its stdout as bytes. */
const run = (command: string, args: string[], input = Buffer.alloc(0)) => runWithInput(command, args, input, nixEnv());

/** One path in the export format, as `nix-store --export` writes it. */
const exported = (nar: Uint8Array, path: string, references: string[] = [], trailer?: Buffer): Buffer =>
  Buffer.concat([wireU64(1), nar, trailer ?? Buffer.concat([wireU64(EXPORT_MAGIC), wireString(path), wireStrings(references), wireString(''), wireU64(0)])]);

t.test('ImportPaths over ssh:// with the real nix-store --export and OpenSSH', async (t) => {
  const kiln = await startTestKiln(t, { 'ssh.enable': true, 'ssh.port': 0, 'ssh.listenAddresses': ['127.0.0.1'] });
  const ada = await signUp(kiln, 'ada');
  const bob = await signUp(kiln, 'bob');
  const adaKey = keyFile('ada');
  const bobKey = keyFile('bob');
  for (const [who, key] of [[ada, adaKey], [bob, bobKey]] as const) {
    const added = await kiln.api('POST', '/user/ssh-keys', { token: who.token, body: { name: 'laptop', public_key: key.publicKey } });
    t.equal(added.status, 200, JSON.stringify(added.message));
  }
  const imports = await createTestCache(kiln.sql, 'imports', { public: true, ownerId: ada.id });
  const pathsIn = async (): Promise<string[]> =>
    (await kiln.sql<{ store_path: string }[]>`
      select p.store_path from path_signatures s join cached_paths p on p.id = s.cached_path_id where s.cache_id = ${imports.id}`).map((r) => r.store_path).sort();

  /** A `nix-store --serve` session on kiln over the real ssh: the handshake, ImportPaths, then `stream`. */
  const serve = async (key: { file: string }, stream: Buffer, write = true) => {
    const ssh = kilnSshOptions(kiln, dir, key.file);
    const command = write ? ['nix-store', '--serve', '--write'] : ['nix-store', '--serve'];
    const session = await run('ssh', [...ssh, 'imports@127.0.0.1', ...command], Buffer.concat([hello, wireU64(IMPORT_PATHS), stream]));
    const answered = session.stdout.length >= 24 && session.stdout.readBigUInt64LE(0) === BigInt(SERVE_MAGIC_2) && session.stdout.readBigUInt64LE(16) === 1n;
    return { ...session, answered };
  };

  t.test('a closure from nix-store --export is stored, signed, and substituted', async (t) => {
    const fixtures = buildFixturePaths();
    const closure = (await nixOk('nix-store', ['-qR', fixtures.refs, fixtures.tree, fixtures.symlink])).trim().split('\n');
    const exportRun = await run('nix-store', [...NIX_OPTIONS, '--export', ...closure]);
    t.equal(exportRun.status, 0, exportRun.stderr);
    const session = await serve(adaKey, exportRun.stdout);
    t.ok(session.answered, `ImportPaths answered 1:\n${session.stderr}`);
    t.same(await pathsIn(), [...closure].sort(), 'every exported path is in the cache');

    const trust = ['--option', 'trusted-public-keys', imports.publicKey, '--option', 'require-sigs', 'true'];
    const substituted = freshStore();
    await nixOk('nix', ['copy', '--from', `${kiln.url}/cache/imports`, '--to', substituted, ...trust, ...closure]);
    const verified = await runNix('nix', ['store', 'verify', '--store', substituted, ...trust, ...closure]);
    t.equal(verified.status, 0, `signed by the cache key, contents intact:\n${verified.stderr}`);
  });

  t.test('hostile streams store nothing', async (t) => {
    const before = await pathsIn();
    const nar: TestNar = await makeTestNar(t, { data: 'imported\n' }, [], 'imported');
    const path = nar.info.storePath;
    const refused = async (what: string, key: { file: string }, stream: Buffer, message: RegExp | null, write = true) => {
      const session = await serve(key, stream, write);
      t.notOk(session.answered, `${what}: not answered as a success`);
      if (message !== null) t.match(session.stderr, message, `${what}: the client is told why`);
      t.same(await pathsIn(), before, `${what}: nothing was stored`);
    };
    await refused('not the export format', adaKey, Buffer.concat([wireU64(2), nar.nar]), /not the nix-store --export format/);
    const broken = Buffer.from(nar.nar);
    broken.write('nix-archive-9', 8);
    await refused('a NAR that does not parse', adaKey, exported(broken, path), /the NAR of an exported path/);
    await refused('no export magic after the NAR', adaKey, exported(nar.nar, path, [], Buffer.concat([wireU64(7), wireString(path)])), /export magic/);
    await refused('a reference the NAR does not hold', adaKey, exported(nar.nar, path, ['/nix/store/00000000000000000000000000000000-elsewhere']), /References: /);
    await refused('a path that is not a store path', adaKey, exported(nar.nar, '/etc/passwd'), /not a store path/);
    await refused('a client gone mid-NAR', adaKey, Buffer.concat([wireU64(1), nar.nar.subarray(0, nar.nar.length - 24)]), null);
    await refused('without writeStore', bobKey, exported(nar.nar, path), /writeStore/);
    await refused('without --write', adaKey, exported(nar.nar, path), /not allowed/, false);
  });
});
