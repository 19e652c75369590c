// After ingest, over both blob backends: deleting from one cache and from the last, the sweeper of
// unfinished uploads and unreferenced blobs, fetch times written in batches, and the hot cache
// forgetting what changed.
import { utimes, writeFile, mkdir, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import t from 'tap';
import { narBlobKey } from '../../../storage/index.js';
import { BACKENDS, blobKeys, chunksOf, countRows, makeTestNar, openTestNarStorage, type TestNarStorage } from '../../support/narStorage.js';

const DAY = 24 * 3600_000;

async function rowsOf(s: TestNarStorage, hash: string): Promise<{ cachedPaths: number; signatures: number }> {
  const [row] = await s.sql<{ p: string; s: string }[]>`
    select (select count(*) from cached_paths where hash_part = ${hash}) as p, (select count(*) from path_signatures where hash_part = ${hash}) as s`;
  return { cachedPaths: Number(row!.p), signatures: Number(row!.s) };
}

async function ingest(s: TestNarStorage, cache: { id: string; key: Parameters<TestNarStorage['nars']['uploads']['finalize']>[0]['signingKey'] }, nar: Awaited<ReturnType<typeof makeTestNar>>) {
  await s.nars.uploads.appendChunk(cache.id, nar.hash, 0, chunksOf(nar.nar));
  return s.nars.uploads.finalize({ cacheId: cache.id, uploadKey: nar.hash, signingKey: cache.key, info: nar.info });
}

for (const backend of BACKENDS) {
  t.test(`${backend} blobs`, async (t) => {
    const shared = await openTestNarStorage(t, backend);
    let caches = 0;
    const fresh = async () => ({ s: shared, a: await shared.cache(`a${++caches}`), b: await shared.cache(`b${caches}`) });

    t.test('deleting from one cache removes its row only; from the last, the path, then the blob', async (t) => {
      const { s, a, b } = await fresh();
      const nar = await makeTestNar(t, { f: 'to be deleted\n' });
      const { fileHash } = await ingest(s, a, nar);
      await ingest(s, b, nar);
      t.ok(await s.nars.reads.narinfo(a.id, nar.hash), 'a serves it (and now remembers it)');

      const fromA = await s.sql.begin((tx) => s.nars.removePathFromCache(tx, a.id, nar.hash));
      t.same({ removed: fromA.removed, lastCopy: fromA.lastCopy }, { removed: true, lastCopy: false });
      await s.nars.settleRemoval(fromA);
      t.equal(await s.nars.reads.narinfo(a.id, nar.hash), null, 'a forgets it at once');
      t.ok(await s.nars.reads.narinfo(b.id, nar.hash), 'b still serves it');
      t.same(await rowsOf(s, nar.hash), { cachedPaths: 1, signatures: 1 });
      t.ok(await s.blobs.stat(narBlobKey(fileHash)), 'the blob stays');

      const fromB = await s.sql.begin((tx) => s.nars.removePathFromCache(tx, b.id, nar.hash));
      t.same({ removed: fromB.removed, lastCopy: fromB.lastCopy, fileHash: fromB.fileHash }, { removed: true, lastCopy: true, fileHash });
      t.same(await rowsOf(s, nar.hash), { cachedPaths: 0, signatures: 0 }, 'rows gone in the transaction');
      t.ok(await s.blobs.stat(narBlobKey(fileHash)), 'the blob waits for the response to be sent');
      await s.nars.settleRemoval(fromB);
      t.equal(await s.blobs.stat(narBlobKey(fileHash)), null, 'then it goes');

      const again = await s.sql.begin((tx) => s.nars.removePathFromCache(tx, b.id, nar.hash));
      t.equal(again.removed, false, 'deleting what is not there removes nothing');
    });

    t.test('a rolled-back delete changes nothing', async (t) => {
      const { s, a } = await fresh();
      const nar = await makeTestNar(t, { f: 'kept\n' });
      await ingest(s, a, nar);
      await t.rejects(s.sql.begin(async (tx) => {
        await s.nars.removePathFromCache(tx, a.id, nar.hash);
        throw new Error('the request failed later');
      }));
      t.same(await rowsOf(s, nar.hash), { cachedPaths: 1, signatures: 1 });
    });

    t.test('identical NAR contents under two store paths share a blob; it stays while one is held', async (t) => {
      const { s, a } = await fresh();
      const one = await makeTestNar(t, { f: 'same bytes\n' }, [], 'one');
      const otherHash = `9999${one.hash.slice(4)}`;
      const two = { ...one, hash: otherHash, info: { ...one.info, storePath: one.info.storePath.replace(one.hash, otherHash) } };
      const first = await ingest(s, a, one);
      const second = await ingest(s, a, two);
      t.equal(first.fileHash, second.fileHash);
      const removal = await s.sql.begin((tx) => s.nars.removePathFromCache(tx, a.id, one.hash));
      t.equal(removal.lastCopy, true);
      await s.nars.settleRemoval(removal);
      t.ok(await s.blobs.stat(narBlobKey(first.fileHash)), 'the other path still points at the blob');
    });

    t.test('the sweeper: old staged uploads, stray staging files, abandoned paths and unreferenced blobs', async (t) => {
      const s = await openTestNarStorage(t, backend, { partialTtlSecs: 3600, graceHours: 24 });
      const a = await s.cache('a');
      const doomed = await s.cache('doomed');
      const kept = await makeTestNar(t, { f: 'kept\n' });
      const keptFile = (await ingest(s, a, kept)).fileHash;
      const orphaned = await makeTestNar(t, { f: 'cache deleted\n' });
      const orphanedFile = (await ingest(s, doomed, orphaned)).fileHash;
      await s.sql`delete from caches where id = ${doomed.id}`; // the cascade takes its signature rows
      const halfway = await makeTestNar(t, { f: 'never finished\n' });
      await s.nars.uploads.appendChunk(a.id, halfway.hash, 0, chunksOf(halfway.nar.subarray(0, 10)));
      await s.blobs.put('nar/0000000000000000000000000000000000000000000000000000.nar.zst', chunksOf(Buffer.from('stray')));
      await mkdir(join(s.baseDir, 'staging', 'tmp'), { recursive: true });
      await writeFile(join(s.baseDir, 'staging', 'tmp', 'crashed.nar.zst'), 'half an ingest');

      const young = await s.nars.sweep(new Date(Date.now() + 60_000));
      t.same(young, { stagedUploads: 0, stagingFiles: 0, partialBlobs: 0, cachedPaths: 0, blobs: 0 }, 'nothing is old enough yet');

      const later = new Date(Date.now() + 2 * DAY);
      await utimes(join(s.baseDir, 'staging', 'tmp', 'crashed.nar.zst'), new Date(Date.now() - 2 * DAY), new Date(Date.now() - 2 * DAY));
      await s.sql`update cached_paths set created_at = now() - interval '2 days'`;
      const report = await s.nars.sweep(later);
      t.equal(report.stagedUploads, 1, 'the unfinished upload');
      t.ok(report.stagingFiles >= 1, 'the crashed ingest file');
      t.equal(report.cachedPaths, 1, 'the path no cache holds');
      t.equal(report.blobs, 2, 'its blob and the stray one');
      t.same(await blobKeys(s.blobs), [narBlobKey(keptFile)], 'only the held NAR is left');
      t.not(keptFile, orphanedFile);
      t.same(await countRows(s.sql), { cachedPaths: 1, signatures: 1, staged: 0 });
      t.same(await readdir(join(s.baseDir, 'staging', 'tmp')), []);
      t.ok(await s.nars.reads.narinfo(a.id, kept.hash), 'the held path is untouched');
    });

    t.test('fetch times are written in batches, not per request', async (t) => {
      const { s, a } = await fresh();
      const nar = await makeTestNar(t, { f: 'fetched\n' });
      await ingest(s, a, nar);
      for (let i = 0; i < 5; i++) await s.nars.reads.narinfo(a.id, nar.hash);
      const [before] = await s.sql<{ last_fetched_at: Date | null }[]>`select last_fetched_at from path_signatures where hash_part = ${nar.hash}`;
      t.equal(before!.last_fetched_at, null, 'nothing written yet');
      await s.nars.fetches.flush();
      const [after] = await s.sql<{ last_fetched_at: Date | null }[]>`select last_fetched_at from path_signatures where hash_part = ${nar.hash}`;
      t.ok(after!.last_fetched_at instanceof Date, 'written by the flush');
    });

    t.test('an upload replaces a remembered miss at once', async (t) => {
      const { s, a } = await fresh();
      const nar = await makeTestNar(t, { f: 'soon\n' });
      t.equal(await s.nars.reads.narinfo(a.id, nar.hash), null, 'a miss, now remembered');
      await ingest(s, a, nar);
      t.ok(await s.nars.reads.narinfo(a.id, nar.hash), 'the upload made the miss forgotten');
    });
  });
}
