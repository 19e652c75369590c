// NAR reads from storage are bounded (nar.maxConcurrentDownloads) and give up in time
// (nar.storageOpenTimeoutSecs) with a 503 that Nix retries, and a reader that stalls loses its
// place: seen from a raw client that holds a stream open by not reading it, and from real Nix.
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { holdOpen, readAll } from '../../support/heldReads.js';
import { signUp } from '../../support/accounts.js';
import { createTestCache } from '../../support/caches.js';
import { startTestKiln } from '../../support/kiln.js';
import { localNar, uploadChunked } from '../../support/narUploads.js';
import { freshStore, nixOk } from '../../support/nixClient.js';
import { nixStoreAdd, tempDir } from '../../support/nixStore.js';

t.test('storage reads', async (t) => {
  const kiln = await startTestKiln(t, {
    'nar.maxConcurrentDownloads': 1,
    'nar.storageOpenTimeoutSecs': 1,
    // every NAR file streams from storage (none is answered from memory)
    'nar.smallBytes': 0,
    'nar.hotCacheBytes': 0,
  });
  const ada = await signUp(kiln, 'ada');
  const cache = await createTestCache(kiln.sql, 'main', { public: true, ownerId: ada.id });
  // Random bytes do not compress: the stored file is far larger than the socket buffers.
  const dir = join(tempDir('kiln-storage-reads-'), 'big');
  mkdirSync(dir);
  writeFileSync(join(dir, 'noise'), randomBytes(24 << 20));
  const path = nixStoreAdd(dir);
  const uploaded = await uploadChunked(kiln, ada.token, 'main', localNar(path), 4 << 20);
  t.equal(uploaded.status, 200, JSON.stringify(uploaded.body));
  const { file_hash, file_size } = uploaded.body.message as { file_hash: string; file_size: number };
  const narUrl = `${kiln.url}/cache/main/nar/${file_hash}.nar.zst`;

  t.test('a read past nar.maxConcurrentDownloads waits, then answers 503 storage_busy with Retry-After', async (t) => {
    const held = await holdOpen(narUrl);
    t.equal(held.statusCode, 200, 'the first read has the only place');
    const refused = await fetch(narUrl);
    t.equal(refused.status, 503);
    t.equal(refused.headers.get('retry-after'), '1');
    t.match(await refused.json(), { error: true, code: 'storage_busy', message: /nar|NAR/ });
    const head = await fetch(narUrl, { method: 'HEAD' });
    t.equal(head.status, 200, 'a HEAD reads nothing from storage, so it needs no place');
    t.equal(await readAll(held), file_size, 'the held read still delivers every byte');
    const after = await fetch(narUrl);
    t.equal(after.status, 200, 'its place is free once it ended');
    t.equal((await after.arrayBuffer()).byteLength, file_size);
  });

  t.test('a client that leaves mid-stream gives its place back', async (t) => {
    const held = await holdOpen(narUrl);
    held.destroy();
    let status = 0;
    for (let attempt = 0; attempt < 50 && status !== 200; attempt++) {
      const res = await fetch(narUrl);
      status = res.status;
      await res.arrayBuffer();
    }
    t.equal(status, 200);
  });

  t.test('a client that stops reading is cut by uWS\'s idle timeout (10 s), and its place comes free', async (t) => {
    const held = await holdOpen(narUrl);
    t.teardown(() => held.destroy());
    // Each refused attempt waits nar.storageOpenTimeoutSecs (1 s) for the held place.
    let res = await fetch(narUrl);
    for (let attempt = 0; attempt < 30 && res.status === 503; attempt++) {
      await res.arrayBuffer();
      res = await fetch(narUrl);
    }
    t.equal(res.status, 200, 'the stalled reader no longer holds a place');
    await res.arrayBuffer();
  });

  t.test('real Nix retries the 503 and copies the path once the place comes free', async (t) => {
    const held = await holdOpen(narUrl);
    const store = freshStore();
    const copy = nixOk('nix', ['copy', '--from', `${kiln.url}/cache/main`, '--to', store, '--option', 'trusted-public-keys', cache.publicKey, path]);
    setTimeout(() => void readAll(held), 1500);
    await copy;
    await nixOk('nix', ['store', 'verify', '--store', store, '--option', 'trusted-public-keys', cache.publicKey, path]);
    t.pass('copied and verified');
  });
});
