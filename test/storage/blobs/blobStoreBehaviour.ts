// One behavioural suite for every BlobStore backend (Attic runs one script over every backend too):
// each backend's test file calls blobStoreBehaviour() with its own store, so they cannot drift apart.
import { access, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Test } from 'tap';
import { BlobKeyError, BlobRangeError, BlobSizeError, type BlobStore } from '../../../storage/blobs/index.js';
import { chunks, digest, failingAfter, pattern, patternSource, readAll } from './blobContent.js';

export interface BehaviourTarget {
  store: BlobStore;
  /** an empty directory for staging files, on the same filesystem a real deployment would use */
  stagingDir: string;
}

const MiB = 1024 * 1024;

async function keysUnder(store: BlobStore, prefix: string): Promise<string[]> {
  const keys: string[] = [];
  for await (const entry of store.list(prefix)) keys.push(entry.key);
  return keys.sort();
}

async function exists(path: string): Promise<boolean> {
  return access(path).then(() => true, () => false);
}

export function blobStoreBehaviour(t: Test, { store, stagingDir }: BehaviourTarget): void {
  t.test('put, then get, stat and list see the whole blob', async (t) => {
    await store.put('basic/one.nar.zst', chunks('hello ', 'world'));
    const read = await store.get('basic/one.nar.zst');
    t.ok(read, 'present');
    t.equal(read?.size, 11);
    t.equal(read?.range, null);
    t.equal((await readAll(read!.body)).toString(), 'hello world');
    t.same(await store.stat('basic/one.nar.zst'), { size: 11 });
    const listed = [];
    for await (const entry of store.list('basic/')) listed.push(entry);
    t.equal(listed.length, 1);
    t.equal(listed[0]?.key, 'basic/one.nar.zst');
    t.equal(listed[0]?.size, 11);
    t.ok(listed[0]?.modified instanceof Date && !Number.isNaN(listed[0].modified.getTime()), 'a modification time');
  });

  t.test('ranges are inclusive, an end past the blob is cut, a start past it is unsatisfiable', async (t) => {
    await store.put('range/blob', chunks(pattern(0, 100)));
    const middle = await store.get('range/blob', { start: 10, end: 19 });
    t.same({ size: middle?.size, range: middle?.range }, { size: 100, range: { start: 10, end: 19 } });
    t.same(await readAll(middle!.body), pattern(10, 10));
    const tail = await store.get('range/blob', { start: 90, end: 10_000 });
    t.same(tail?.range, { start: 90, end: 99 });
    t.same(await readAll(tail!.body), pattern(90, 10));
    const one = await store.get('range/blob', { start: 0, end: 0 });
    t.same(await readAll(one!.body), pattern(0, 1));
    await t.rejects(store.get('range/blob', { start: 100, end: 100 }), BlobRangeError);
    await t.rejects(store.get('range/blob', { start: 100, end: 200 }), { name: 'BlobRangeError', size: 100 });
    await t.rejects(store.get('range/blob', { start: 5, end: 2 }), /start and end must be integers with 0 <= start <= end/);
  });

  t.test('absent keys: get and stat give null, delete succeeds', async (t) => {
    t.equal(await store.get('absent/nothing.nar.zst'), null);
    t.equal(await store.get('absent/nothing.nar.zst', { start: 0, end: 9 }), null);
    t.equal(await store.stat('absent/nothing.nar.zst'), null);
    await store.delete('absent/nothing.nar.zst');
    t.same(await keysUnder(store, 'absent/'), []);
  });

  t.test('an empty blob is a blob', async (t) => {
    await store.put('empty/blob', chunks());
    t.same(await store.stat('empty/blob'), { size: 0 });
    const read = await store.get('empty/blob');
    t.equal(read?.size, 0);
    t.equal((await readAll(read!.body)).length, 0);
    await t.rejects(store.get('empty/blob', { start: 0, end: 0 }), BlobRangeError);
  });

  t.test('put replaces, delete removes, deleting twice is fine', async (t) => {
    await store.put('replace/blob', chunks('first'));
    await store.put('replace/blob', chunks('second!'));
    t.equal((await readAll((await store.get('replace/blob'))!.body)).toString(), 'second!');
    await store.delete('replace/blob');
    t.equal(await store.stat('replace/blob'), null);
    t.same(await keysUnder(store, 'replace/'), []);
    await store.delete('replace/blob');
  });

  t.test('bad keys are rejected before anything happens', async (t) => {
    const bad = ['', '/nar/x', 'nar/../x', '../x', './x', 'nar//x', 'nar/x/', 'nar/.hidden', 'nar/x y', 'nar/ä', 'nar\\x', 'a'.repeat(513)];
    for (const key of bad) {
      await t.rejects(store.put(key, chunks('x')), BlobKeyError, `put ${JSON.stringify(key)}`);
      await t.rejects(store.get(key), BlobKeyError, `get ${JSON.stringify(key)}`);
      await t.rejects(store.stat(key), BlobKeyError, `stat ${JSON.stringify(key)}`);
      await t.rejects(store.delete(key), BlobKeyError, `delete ${JSON.stringify(key)}`);
      await t.rejects(store.presignedUrl(key, 60), BlobKeyError, `presignedUrl ${JSON.stringify(key)}`);
      t.throws(() => store.localPath(key), BlobKeyError, `localPath ${JSON.stringify(key)}`);
    }
    for (const prefix of ['/nar', '../', 'nar/../', 'a b']) {
      await t.rejects(keysUnder(store, prefix), BlobKeyError, `list ${JSON.stringify(prefix)}`);
    }
    await t.rejects(store.put('nar/x y', chunks('x')), /invalid blob key "nar\/x y": segments use only/);
  });

  t.test('an interrupted put leaves nothing under the key, and an older blob intact', async (t) => {
    const dropped = new Error('connection dropped');
    await t.rejects(store.put('interrupted/new', failingAfter(dropped, 'partial ', 'bytes')), dropped);
    t.equal(await store.stat('interrupted/new'), null);
    t.equal(await store.get('interrupted/new'), null);

    await store.put('interrupted/old', chunks('version one'));
    await t.rejects(store.put('interrupted/old', failingAfter(dropped, 'version two, cut')), dropped);
    t.equal((await readAll((await store.get('interrupted/old'))!.body)).toString(), 'version one');

    // Past one S3 part (5 MiB): the multipart upload that was started must be abandoned, not completed.
    const big = patternSource(7 * MiB, { onChunk: (offset) => { if (offset >= 6 * MiB) throw dropped; } });
    await t.rejects(store.put('interrupted/big', big), dropped);
    t.equal(await store.stat('interrupted/big'), null);
    t.same(await keysUnder(store, 'interrupted/'), ['interrupted/old'], 'list() shows no temporary or partial blob');
    const all = await keysUnder(store, '');
    t.notOk(all.some((key) => key.split('/').some((segment) => segment.startsWith('.'))), 'no temporary names anywhere');
  });

  t.test('a put with a size refuses a source of another length', async (t) => {
    await t.rejects(store.put('sized/long', chunks('hello world'), 5), BlobSizeError);
    await t.rejects(store.put('sized/short', chunks('hello world'), 20), /expected 20 bytes, the source delivered 11/);
    await store.put('sized/exact', chunks('hello world'), 11);
    t.same(await keysUnder(store, 'sized/'), ['sized/exact']);
    await t.rejects(store.put('sized/bad', chunks(''), -1), /invalid blob size -1/);
  });

  t.test('a staging file is taken over by put; a failed put leaves it to the caller', async (t) => {
    const staged = join(stagingDir, 'staged.nar.zst');
    await writeFile(staged, 'compressed nar');
    await store.put('staged/blob', staged, 14);
    t.equal((await readAll((await store.get('staged/blob'))!.body)).toString(), 'compressed nar');
    t.notOk(await exists(staged), 'the staging file is gone');

    await writeFile(staged, 'compressed nar');
    await t.rejects(store.put('staged/wrong-size', staged, 99), BlobSizeError);
    await t.rejects(store.put('staged/bad key', staged), BlobKeyError);
    t.ok(await exists(staged), 'still there after failed puts');
    t.same(await keysUnder(store, 'staged/'), ['staged/blob']);
  });

  t.test('a 20 MiB blob goes in and out as a stream of chunks', async (t) => {
    const size = 20 * MiB;
    const expected = await digest(patternSource(size, { seed: 7 }));
    await store.put('large/streamed', patternSource(size, { seed: 7 }), size);
    const read = await store.get('large/streamed');
    t.equal(read?.size, size);
    const got = await digest(read!.body);
    t.equal(got.sha256, expected.sha256);
    t.ok(got.chunks > 16 && got.largestChunk <= MiB, `read in ${got.chunks} chunks of at most ${got.largestChunk} bytes`);

    const staged = join(stagingDir, 'large.nar.zst');
    await writeFile(staged, patternSource(size, { seed: 8 }));
    await store.put('large/staged', staged, size);
    const slice = await store.get('large/staged', { start: 5 * MiB - 3, end: 5 * MiB + 996 });
    t.same(await readAll(slice!.body), pattern(5 * MiB - 3, 1000, 8), 'a range across an S3 part boundary');
    t.equal((await digest((await store.get('large/staged'))!.body)).sha256, (await digest(patternSource(size, { seed: 8 }))).sha256);
  });

  t.test('reuseChunks: a reader done with each chunk before the next reads the right bytes, two at once too', async (t) => {
    const size = 5 * MiB + 123;
    await store.put('large/reused-a', patternSource(size, { seed: 11 }), size);
    await store.put('large/reused-b', patternSource(size, { seed: 12 }), size);
    const [a, b] = await Promise.all([digest(patternSource(size, { seed: 11 })), digest(patternSource(size, { seed: 12 }))]);
    for (let pass = 0; pass < 2; pass++) {
      // Interleaved reads: the two streams must never share a buffer, also once buffers were handed back.
      const [gotA, gotB] = await Promise.all([
        store.get('large/reused-a', undefined, { reuseChunks: true }).then((r) => digest(r!.body)),
        store.get('large/reused-b', undefined, { reuseChunks: true }).then((r) => digest(r!.body)),
      ]);
      t.equal(gotA.sha256, a.sha256, `pass ${pass}: first stream`);
      t.equal(gotB.sha256, b.sha256, `pass ${pass}: second stream`);
    }
    const slice = await store.get('large/reused-a', { start: MiB - 7, end: 3 * MiB + 9 }, { reuseChunks: true });
    const copies: Buffer[] = [];
    for await (const chunk of slice!.body) copies.push(Buffer.from(chunk));
    t.same(Buffer.concat(copies), pattern(MiB - 7, 2 * MiB + 17, 11), 'a range');
  });

  // Real S3's PUT is atomic, last writer wins; for S3 the test server's front makes s3rver's in-place write so.
  t.test('concurrent puts of one key leave one whole blob', async (t) => {
    await Promise.all([
      store.put('race/blob', patternSource(300_000, { seed: 1 })),
      store.put('race/blob', patternSource(300_000, { seed: 2 })),
      store.put('race/blob', patternSource(300_000, { seed: 3 })),
    ]);
    const got = (await digest((await store.get('race/blob'))!.body)).sha256;
    const candidates = await Promise.all([1, 2, 3].map(async (seed) => (await digest(patternSource(300_000, { seed }))).sha256));
    t.ok(candidates.includes(got), 'equal to one of the three sources');
    t.same(await keysUnder(store, 'race/'), ['race/blob']);
  });

  t.test('a reader during an overwrite sees the old blob or the new one, whole', async (t) => {
    const oldSize = MiB;
    const newSize = 24 * MiB;
    await store.put('swap/blob', patternSource(oldSize, { seed: 4 }), oldSize);
    const heads = new Set([pattern(0, 16, 4).toString('hex'), pattern(0, 16, 5).toString('hex')]);
    let done = false;
    const overwrite = store.put('swap/blob', patternSource(newSize, { seed: 5 }), newSize).finally(() => { done = true; });
    const seen = new Set<string>();
    // Bounded: at most 2,000 looks while the overwrite runs.
    for (let look = 0; look < 2000 && !done; look++) {
      const found = await store.stat('swap/blob');
      const head = await store.get('swap/blob', { start: 0, end: 15 });
      const bytes = head === null ? null : (await readAll(head.body)).toString('hex');
      seen.add(`size ${found?.size} head ${bytes !== null && heads.has(bytes) ? 'whole' : bytes}`);
    }
    await overwrite;
    t.ok([...seen].every((look) => look === `size ${oldSize} head whole` || look === `size ${newSize} head whole`), `only whole blobs: ${[...seen].join('; ')}`);
    t.equal((await store.stat('swap/blob'))?.size, newSize);
  });

  t.test('list filters by any leading part of a key', async (t) => {
    for (const key of ['listing/nar/0a.nar.zst', 'listing/nar/0b.nar.zst', 'listing/nar/1c.nar.zst', 'listing/log/x']) {
      await store.put(key, chunks(key));
    }
    t.same(await keysUnder(store, 'listing/'), ['listing/log/x', 'listing/nar/0a.nar.zst', 'listing/nar/0b.nar.zst', 'listing/nar/1c.nar.zst']);
    t.same(await keysUnder(store, 'listing/nar/0'), ['listing/nar/0a.nar.zst', 'listing/nar/0b.nar.zst']);
    t.same(await keysUnder(store, 'listing/na'), ['listing/nar/0a.nar.zst', 'listing/nar/0b.nar.zst', 'listing/nar/1c.nar.zst']);
    t.same(await keysUnder(store, 'listing/nar/2'), []);
    t.same(await keysUnder(store, 'nowhere/'), []);
    t.ok((await keysUnder(store, '')).includes('listing/log/x'), 'an empty prefix lists everything');
  });

  t.test('cancel() releases a body that is not read', async (t) => {
    await store.put('cancel/blob', patternSource(2 * MiB));
    for (let i = 0; i < 20; i++) (await store.get('cancel/blob'))!.cancel();
    const half = await store.get('cancel/blob');
    for await (const part of half!.body) {
      t.ok(part.byteLength > 0);
      break; // leaving the loop releases it too
    }
    t.equal((await digest((await store.get('cancel/blob'))!.body)).bytes, 2 * MiB, 'the store still serves it');
  });

  t.test('presigned URLs', async (t) => {
    await store.put('presigned/blob', chunks('signed bytes'));
    const url = await store.presignedUrl('presigned/blob', 300);
    if (store.backend === 'fs') {
      t.equal(url, null, 'the filesystem has none');
      return;
    }
    t.type(url, 'string');
    const response = await fetch(url!);
    t.equal(response.status, 200);
    t.equal(await response.text(), 'signed bytes', 'plain fetch(), no credentials');
  });
}
