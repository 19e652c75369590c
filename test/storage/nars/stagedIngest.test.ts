// What a chunked upload prepares while its chunks arrive (the check pass, the joined stored file)
// lives only in the receiving process's memory. Without it (a restart before finalize or in the
// middle of the upload, a chunk that failed midway) finalize falls back to the full passes over the
// staged file, and the result must be the very same: NarHash, listing, FileHash and stored bytes.
import { randomBytes } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import pino from 'pino';
import t from 'tap';
import { createCpuPool, narBlobKey, openNarStorage, type NarStorage } from '../../../storage/index.js';
import { chunksOf, makeTestNar, openTestNarStorage, testInstanceLease, type TestNar } from '../../support/narStorage.js';

t.test('finalize with and without the state built while chunks arrived', async (t) => {
  const first = await openTestNarStorage(t, 'fs');
  const { sql, blobs, baseDir } = first;
  // A second process on the same database, blobs and disk: it knows nothing the first one kept in memory.
  const restarted = async (): Promise<NarStorage> => {
    const cpu = createCpuPool({ maxThreads: 1 });
    const leaseKey = await testInstanceLease(t, first.url);
    const nars = openNarStorage({
      sql, blobs, cpu, leaseKey, log: pino({ level: 'silent' }),
      config: {
        baseDir, 'nar.hotCacheBytes': 64 << 20, 'nar.smallBytes': 1 << 20, 'nar.maxUploadSize': 64 << 20,
        'nar.partialTtlSecs': 86400, 'gc.narUploadGraceHours': 24, 'gc.intervalSecs': 3600,
        'nar.maxConcurrentDownloads': 16, 'nar.maxConcurrentServes': 8, 'nar.storageOpenTimeoutSecs': 60,
      },
    });
    t.teardown(async () => {
      await nars.close();
      await cpu.destroy();
    });
    return nars;
  };
  const stage = async (nars: NarStorage, cacheId: string, nar: TestNar, from: number, to: number) => {
    let offset = from;
    for await (const piece of chunksOf(nar.nar.subarray(from, to), 5 << 20)) offset = await nars.uploads.appendChunk(cacheId, nar.hash, offset, [piece] as unknown as AsyncIterable<Uint8Array>);
    return offset;
  };
  const finalize = (nars: NarStorage, cache: Awaited<ReturnType<typeof first.cache>>, nar: TestNar) =>
    nars.uploads.finalize({ cacheId: cache.id, uploadKey: nar.hash, signingKey: cache.key, info: nar.info });
  // The same NAR under another store path: a cached path of its own, so its FileHash is computed, not looked up.
  const renamed = (nar: TestNar, first: string): TestNar => {
    const hash = `${first}${nar.hash.slice(1)}`;
    return { ...nar, hash, info: { ...nar.info, storePath: nar.info.storePath.replace(nar.hash, hash) } };
  };
  const listing = async (cacheId: string, hash: string) => (await sql<{ listing: string }[]>`
    select cp.listing from cached_paths cp join path_signatures ps on ps.cached_path_id = cp.id where ps.cache_id = ${cacheId} and ps.hash_part = ${hash}`)[0]?.listing;

  // 40 MiB: two whole frames joined while chunks arrive, and a last one at finalize.
  const pattern = Buffer.alloc(1 << 20);
  for (let i = 0; i < pattern.length; i++) pattern[i] = (i * 7919) % 251;
  const original = await makeTestNar(t, { a: Buffer.concat(Array.from({ length: 20 }, () => pattern)), b: randomBytes(20 << 20), c: 'small\n' }, [], 'staged');

  const live = await first.cache('live');
  await stage(first.nars, live.id, original, 0, original.nar.length);
  const expected = await finalize(first.nars, live, original);
  t.equal(expected.narHash, original.info.narHash);
  const stored = await blobs.get(narBlobKey(expected.fileHash));
  const bytes: Uint8Array[] = [];
  for await (const piece of stored!.body) bytes.push(piece);
  t.ok(execFileSync('zstd', ['-d', '-c'], { input: Buffer.concat(bytes), maxBuffer: 1 << 27 }).equals(original.nar), 'the file joined while chunks arrived is the NAR');

  t.test('a restart between the last chunk and finalize', async (t) => {
    const cache = await first.cache('restart-before-finalize');
    const nar = renamed(original, '9');
    await stage(first.nars, cache.id, nar, 0, nar.nar.length);
    const outcome = await finalize(await restarted(), cache, nar);
    t.same({ ...outcome, storePath: '' }, { ...expected, storePath: '' }, 'the same NarHash, FileHash and size');
    t.equal(await listing(cache.id, nar.hash), await listing(live.id, original.hash), 'the same listing');
  });

  t.test('a restart in the middle of the upload', async (t) => {
    const cache = await first.cache('restart-midway');
    const nar = renamed(original, '8');
    const half = 25 << 20;
    await stage(first.nars, cache.id, nar, 0, half);
    const second = await restarted();
    await stage(second, cache.id, nar, half, nar.nar.length);
    const outcome = await finalize(second, cache, nar);
    t.equal(outcome.fileHash, expected.fileHash, 'the frames were made again from the staged file');
    t.equal(outcome.narHash, expected.narHash, 'the check pass ran over the staged file');
    t.equal(await listing(cache.id, nar.hash), await listing(live.id, original.hash));
  });

  t.test('a chunk that fails midway: its bytes count for nothing, the resumed upload is checked in full', async (t) => {
    const cache = await first.cache('failed-chunk');
    const nar = renamed(original, '7');
    await stage(first.nars, cache.id, nar, 0, 10 << 20);
    const failing = (async function* () {
      yield nar.nar.subarray(10 << 20, 12 << 20);
      throw new Error('client went away');
    })();
    await t.rejects(first.nars.uploads.appendChunk(cache.id, nar.hash, 10 << 20, failing), { message: 'client went away' });
    t.equal((await first.nars.uploads.staged(cache.id, nar.hash))?.bytesStaged, 10 << 20);
    await stage(first.nars, cache.id, nar, 10 << 20, nar.nar.length);
    const outcome = await finalize(first.nars, cache, nar);
    t.same({ fileHash: outcome.fileHash, narHash: outcome.narHash }, { fileHash: expected.fileHash, narHash: expected.narHash });
  });

  t.test('bytes that are not the NAR the narinfo names are refused either way, and nothing is stored', async (t) => {
    const cache = await first.cache('wrong-bytes');
    const nar = renamed(original, '6');
    const other = await makeTestNar(t, { a: 'something else\n'.repeat(1000) });
    const claimed = { ...nar, nar: Buffer.concat([other.nar, Buffer.alloc(nar.nar.length - other.nar.length, 1)]) };
    await stage(first.nars, cache.id, claimed, 0, claimed.nar.length);
    await t.rejects(finalize(first.nars, cache, nar), { kind: 'invalid_nar', message: /trailing garbage/ });
    await t.rejects(finalize(await restarted(), cache, nar), { kind: 'invalid_nar', message: /trailing garbage/ });
    t.equal(await listing(cache.id, nar.hash), undefined, 'no row');
    t.ok(await first.nars.uploads.staged(cache.id, nar.hash), 'the staging stays for a corrected upload');
  });
});
