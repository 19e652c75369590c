// Acceptance with real Nix (2.8): a closure built with nix-build goes into kiln three ways (REST
// chunked, REST single-shot, `nix copy --to` with netrc credentials) and comes back out into fresh
// stores with `nix copy --from` and `nix-store -r`, verified by `nix store verify`.
import t, { type Test } from 'tap';
import { startTestKiln } from '../../support/kiln.js';
import { signUp } from '../../support/accounts.js';
import { createTestCache } from '../../support/caches.js';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { buildFixturePaths, tempDir } from '../../support/nixStore.js';
import { localNar, uploadChunked, uploadInfo, uploadSingle } from '../../support/narUploads.js';
import { freshStore, netrcFile, nixOk, runNix } from '../../support/nixClient.js';

t.test('real Nix against kiln', async (t) => {
  const kiln = await startTestKiln(t);
  const ada = await signUp(kiln, 'ada');
  const fixtures = buildFixturePaths();
  // refs depends on file: the closure of refs is [file, refs].
  const closure = [fixtures.file, fixtures.refs, fixtures.tree, fixtures.symlink, fixtures.executable, fixtures.empty];
  const trust = (key: string) => ['--option', 'trusted-public-keys', key];

  const substituteAndVerify = async (t: Test, cache: string, key: string, netrc?: string) => {
    const store = freshStore();
    await nixOk('nix', ['copy', '--from', `${kiln.url}/cache/${cache}`, '--to', store, ...trust(key), ...closure], netrc ? { netrc } : {});
    const verified = await runNix('nix', ['store', 'verify', '--store', store, ...trust(key), ...closure]);
    t.equal(verified.status, 0, `nix store verify passes:\n${verified.stderr}`);
  };

  t.test('uploaded by REST chunks: nix copy --from and nix-store -r substitute it', async (t) => {
    const cache = await createTestCache(kiln.sql, 'rest', { public: true, ownerId: ada.id });
    for (const path of closure) {
      const res = await uploadChunked(kiln, ada.token, 'rest', localNar(path), 16 * 1024);
      t.equal(res.status, 200, res.status === 200 ? `uploaded ${path}` : JSON.stringify(res.body));
    }
    await substituteAndVerify(t, 'rest', cache.publicKey);
    const store = freshStore();
    await nixOk('nix-store', ['-r', '--store', store, '--option', 'substituters', `${kiln.url}/cache/rest`, ...trust(cache.publicKey), fixtures.refs]);
    const verified = await runNix('nix', ['store', 'verify', '--store', store, ...trust(cache.publicKey), fixtures.refs, fixtures.file]);
    t.equal(verified.status, 0, verified.stderr);
    const untrusted = await runNix('nix', ['copy', '--from', `${kiln.url}/cache/rest`, '--to', freshStore(), ...trust('other-1:3REoSjvMtmBzmoRZVZPZuB/MG/vyNbytXCID+0ocOAA='), fixtures.file]);
    t.not(untrusted.status, 0, 'a client that does not trust the cache key refuses the paths');
  });

  t.test('uploaded single-shot', async (t) => {
    const cache = await createTestCache(kiln.sql, 'single', { public: true, ownerId: ada.id });
    for (const path of closure) {
      const nar = localNar(path);
      const res = await uploadSingle(kiln, ada.token, 'single', { narinfo: uploadInfo(nar.info), nar: nar.nar });
      t.equal(res.status, 200, res.status === 200 ? `uploaded ${path}` : JSON.stringify(res.body));
    }
    await substituteAndVerify(t, 'single', cache.publicKey);
  });

  t.test('nix copy --to a private cache with netrc credentials, in zstd, xz and bzip2', async (t) => {
    const netrc = netrcFile(ada.token);
    for (const compression of ['zstd', 'xz', 'bzip2']) {
      const name = `nix-${compression}`;
      const cache = await createTestCache(kiln.sql, name, { public: false, ownerId: ada.id });
      // With write-nar-listing Nix PUTs its own .ls too; kiln accepts it and keeps its own.
      const extra = compression === 'zstd' ? '&write-nar-listing=true' : '';
      await nixOk('nix', ['copy', '--to', `${kiln.url}/cache/${name}?compression=${compression}${extra}`, ...closure], { netrc });
      await substituteAndVerify(t, name, cache.publicKey, netrc);
      const again = await runNix('nix', ['copy', '--to', `${kiln.url}/cache/${name}?compression=${compression}`, ...closure], { netrc });
      t.equal(again.status, 0, 'copying again finds everything there');
    }
    const denied = await runNix('nix', ['copy', '--from', `${kiln.url}/cache/nix-zstd`, '--to', freshStore(), ...trust('x:3REoSjvMtmBzmoRZVZPZuB/MG/vyNbytXCID+0ocOAA='), fixtures.file]);
    t.not(denied.status, 0, 'no netrc, no private cache');
  });

  t.test('a NAR stored as several zstd frames substitutes', async (t) => {
    const dir = tempDir('kiln-big-');
    writeFileSync(join(dir, 'big.nix'), `derivation { name = "kiln-fixture-big"; builder = "/bin/sh"; system = builtins.currentSystem;
      PATH = "/bin:/usr/bin"; args = [ "-c" "head -c 40000000 /dev/urandom > $out" ]; }`);
    const big = (await nixOk('nix-build', [join(dir, 'big.nix'), '--no-out-link'])).trim();
    const cache = await createTestCache(kiln.sql, 'big', { public: true, ownerId: ada.id });
    const res = await uploadChunked(kiln, ada.token, 'big', localNar(big), 8 << 20);
    t.equal(res.status, 200, JSON.stringify(res.body));
    t.ok((res.body.message as { file_size: number }).file_size > 32 << 20, 'three frames');
    const store = freshStore();
    await nixOk('nix', ['copy', '--from', `${kiln.url}/cache/big`, '--to', store, ...trust(cache.publicKey), big]);
    const verified = await runNix('nix', ['store', 'verify', '--store', store, ...trust(cache.publicKey), big]);
    t.equal(verified.status, 0, verified.stderr);
  });

  t.test('nix copy --to without writeStore is refused with a 4xx, not a hang', async (t) => {
    await createTestCache(kiln.sql, 'readonly', { public: true, ownerId: ada.id });
    const bob = await signUp(kiln, 'bob');
    const refused = await runNix('nix', ['copy', '--to', `${kiln.url}/cache/readonly`, fixtures.file], { netrc: netrcFile(bob.token) });
    t.not(refused.status, 0);
    t.match(refused.stderr, /403/);
  });
});
