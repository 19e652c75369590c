import { mkdir, mkdtemp, readFile, readdir, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { FilesystemBlobStore } from '../../../storage/blobs/index.js';
import { chunks, failingAfter, patternSource } from './blobContent.js';
import { blobStoreBehaviour } from './blobStoreBehaviour.js';

async function tempRoot(t: Test): Promise<string> {
  const root = await mkdtemp(join(tmpdir(), 'kiln-blobs-'));
  t.teardown(() => rm(root, { recursive: true, force: true }));
  return root;
}

t.test('the shared behaviour', async (t) => {
  const root = await tempRoot(t);
  await mkdir(join(root, 'staging'));
  blobStoreBehaviour(t, { store: new FilesystemBlobStore(join(root, 'blobs')), stagingDir: join(root, 'staging') });
});

t.test('a key is a path under the root', async (t) => {
  const root = await tempRoot(t);
  const store = new FilesystemBlobStore(root);
  t.equal(store.backend, 'fs');
  await store.put('nar/0abc.nar.zst', chunks('bytes'));
  t.equal((await stat(join(root, 'nar', '0abc.nar.zst'))).size, 5);
  t.equal(await store.presignedUrl('nar/0abc.nar.zst'), null);
  t.equal(store.localPath('nar/0abc.nar.zst'), join(root, 'nar', '0abc.nar.zst'), 'the file a serving thread reads');
});

t.test('a staging file on the same filesystem is renamed in, not copied', async (t) => {
  const root = await tempRoot(t);
  const store = new FilesystemBlobStore(join(root, 'blobs'));
  const staged = join(root, 'staged');
  await writeFile(staged, 'zstd bytes');
  const inode = (await stat(staged)).ino;
  await store.put('nar/x.nar.zst', staged);
  t.equal((await stat(join(root, 'blobs', 'nar', 'x.nar.zst'))).ino, inode);
});

t.test('a staging file on another filesystem is copied in durably, then removed', async (t) => {
  const root = await tempRoot(t);
  const shm = await mkdtemp('/dev/shm/kiln-staging-').catch(() => null);
  if (shm === null || (await stat(shm)).dev === (await stat(root)).dev) {
    t.plan(0, 'needs /dev/shm on another filesystem than the temporary directory');
    return;
  }
  t.teardown(() => rm(shm, { recursive: true, force: true }));
  const store = new FilesystemBlobStore(join(root, 'blobs'));
  const staged = join(shm, 'staged');
  await writeFile(staged, 'across devices');
  await store.put('nar/x.nar.zst', staged, 14);
  t.equal((await readFile(join(root, 'blobs', 'nar', 'x.nar.zst'))).toString(), 'across devices');
  await t.rejects(stat(staged), { code: 'ENOENT' }, 'the staging file is removed');
  t.same(await readdir(join(root, 'blobs', 'nar')), ['x.nar.zst'], 'no temporary file left behind');
});

t.test('a put streams to a temporary file beside the target, removed if the source fails', async (t) => {
  const root = await tempRoot(t);
  const store = new FilesystemBlobStore(root);
  await store.put('nar/first', chunks('x')); // creates the directory
  let seenOnDisk = 0;
  const source = patternSource(4 * 1024 * 1024, {
    onChunk: async (offset) => {
      if (offset !== 2 * 1024 * 1024) return;
      const temporaries = (await readdir(join(root, 'nar'))).filter((name) => name.startsWith('.partial-'));
      if (temporaries.length === 1) seenOnDisk = (await stat(join(root, 'nar', temporaries[0]!))).size;
    },
  });
  await store.put('nar/streamed', source);
  t.ok(seenOnDisk > 0 && seenOnDisk < 4 * 1024 * 1024, `${seenOnDisk} bytes were on disk halfway through the source`);

  await t.rejects(store.put('nar/failed', failingAfter(new Error('gone'), 'some', 'bytes')), /gone/);
  t.same((await readdir(join(root, 'nar'))).sort(), ['first', 'streamed'], 'no temporary file left behind');
});

t.test('sweepPartial removes old temporaries only; list never shows them', async (t) => {
  const root = await tempRoot(t);
  const store = new FilesystemBlobStore(root);
  await store.put('nar/kept.nar.zst', chunks('kept'));
  const old = join(root, 'nar', '.partial-0123456789abcdef');
  const recent = join(root, 'nar', '.partial-fedcba9876543210');
  await writeFile(old, 'left by a crash');
  await writeFile(recent, 'being written');
  const dayAgo = new Date(Date.now() - 86_400_000);
  await utimes(old, dayAgo, dayAgo);
  const listed = [];
  for await (const entry of store.list()) listed.push(entry.key);
  t.same(listed, ['nar/kept.nar.zst']);
  t.equal(await store.sweepPartial(new Date(Date.now() - 3_600_000)), 1);
  t.same((await readdir(join(root, 'nar'))).sort(), ['.partial-fedcba9876543210', 'kept.nar.zst']);
});

t.test('what is not a blob under the root is not reported', async (t) => {
  const root = await tempRoot(t);
  const store = new FilesystemBlobStore(root);
  await store.put('nar/a.nar.zst', chunks('a'));
  await writeFile(join(root, 'nar', 'not a key'), 'dropped here by hand');
  await mkdir(join(root, 'nar', 'dir.nar.zst'));
  const listed = [];
  for await (const entry of store.list('nar/')) listed.push(entry.key);
  t.same(listed, ['nar/a.nar.zst']);
  t.equal(await store.get('nar'), null, 'a directory is no blob');
  t.equal(await store.stat('nar'), null);
  t.equal(await store.get('nar/a.nar.zst/below'), null, 'a path through a file is absent');
  t.equal(await store.stat('nar/a.nar.zst/below'), null);
  await store.delete('nar/a.nar.zst/below');
});

t.test('a store whose root does not exist yet lists nothing and creates it on the first put', async (t) => {
  const root = join(await tempRoot(t), 'later', 'blobs');
  const store = new FilesystemBlobStore(root);
  const listed = [];
  for await (const entry of store.list()) listed.push(entry);
  t.same(listed, []);
  t.equal(await store.sweepPartial(new Date()), 0);
  await store.put('nar/a', chunks('a'));
  t.ok((await stat(root)).isDirectory());
});
