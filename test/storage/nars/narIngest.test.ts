// Ingest over both blob backends: staging, finalize, the checks against the narinfo, signing,
// dedup across caches, and what is left behind when something fails (nothing but the staging).
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { gzipSync, brotliCompressSync, zstdCompressSync } from 'node:zlib';
import t from 'tap';
import { decompressNar, parseNarinfo, verifyNarinfo } from '../../../protocol/index.js';
import { narBlobKey, type BlobStore } from '../../../storage/index.js';
import { BACKENDS, blobKeys, chunksOf, countRows, makeTestNar, openTestNarStorage, type TestNar } from '../../support/narStorage.js';

async function readBlob(blobs: BlobStore, key: string): Promise<Buffer> {
  const read = await blobs.get(key);
  if (!read) throw new Error(`no blob ${key}`);
  const chunks: Uint8Array[] = [];
  for await (const c of read.body) chunks.push(c);
  return Buffer.concat(chunks);
}

async function unzstd(bytes: Buffer): Promise<Buffer> {
  const chunks: Uint8Array[] = [];
  for await (const c of decompressNar([bytes], 'zstd')) chunks.push(c);
  return Buffer.concat(chunks);
}

for (const backend of BACKENDS) {
  t.test(`${backend} blobs`, async (t) => {
    const s = await openTestNarStorage(t, backend);
    const { nars, sql, blobs } = s;
    const main = await s.cache('main');
    const other = await s.cache('other');
    const stage = async (cacheId: string, nar: TestNar, chunk = 1000) => {
      let offset = 0;
      for await (const piece of chunksOf(nar.nar, chunk)) offset = await nars.uploads.appendChunk(cacheId, nar.hash, offset, [piece] as unknown as AsyncIterable<Uint8Array>);
      return offset;
    };
    const finalize = (cacheId: string, nar: TestNar, key = main.key, info = nar.info) =>
      nars.uploads.finalize({ cacheId, uploadKey: nar.hash, signingKey: key, info });

    t.test('chunks, then finalize: a signed narinfo, the blob under its file hash, the staging gone', async (t) => {
      const nar = await makeTestNar(t, { hello: 'hello world\n'.repeat(500) });
      t.equal(await stage(main.id, nar), nar.nar.length);
      const outcome = await finalize(main.id, nar);
      t.equal(outcome.status, 'added');
      t.equal(outcome.narHash, nar.info.narHash);
      const text = (await nars.reads.narinfo(main.id, nar.hash))!.toString();
      const parsed = parseNarinfo(text);
      t.ok(parsed.ok, 'the narinfo parses');
      if (!parsed.ok) return;
      t.equal(parsed.value.url, `nar/${outcome.fileHash}.nar.zst`);
      t.equal(parsed.value.compression, 'zstd');
      t.ok(verifyNarinfo(parsed.value, [main.key.publicKey]), 'signed with the cache key');
      t.same(await unzstd(await readBlob(blobs, narBlobKey(outcome.fileHash))), nar.nar, 'the blob is the NAR, zstd-compressed');
      t.equal(await nars.uploads.staged(main.id, nar.hash), null, 'the staged upload is gone');
      t.equal((await finalize(main.id, nar)).status, 'held', 'finalizing again after a lost answer is harmless');
    });

    t.test('the same NAR in two caches: one cached path, one blob, two signature rows', async (t) => {
      const nar = await makeTestNar(t, { data: 'shared\n' });
      await stage(main.id, nar);
      const first = await finalize(main.id, nar);
      const before = await blobKeys(blobs);
      await stage(other.id, nar);
      const second = await finalize(other.id, nar, other.key);
      t.equal(second.status, 'added');
      t.equal(second.fileHash, first.fileHash);
      t.same(await blobKeys(blobs), before, 'no second blob');
      const rows = await sql<{ signature: string }[]>`select signature from path_signatures where hash_part = ${nar.hash} order by signature`;
      t.equal(rows.length, 2);
      t.not(rows[0]!.signature, rows[1]!.signature, 'each cache signs with its own key');
      const [paths] = await sql<{ n: string }[]>`select count(*) as n from cached_paths where hash_part = ${nar.hash}`;
      t.equal(Number(paths!.n), 1);
    });

    t.test('a NAR another cache brought is signed, not stored again, even if this upload compressed differently', async (t) => {
      const nar = await makeTestNar(t, { data: 'compressed elsewhere\n' });
      await stage(main.id, nar);
      const first = await finalize(main.id, nar);
      // As if another zstd version had written the stored file: same NAR, other file bytes and hash.
      const elsewhere = '1111111111111111111111111111111111111111111111111111';
      await blobs.put(narBlobKey(elsewhere), chunksOf(await readBlob(blobs, narBlobKey(first.fileHash))));
      await blobs.delete(narBlobKey(first.fileHash));
      await sql`update cached_paths set file_hash = ${elsewhere} where hash_part = ${nar.hash}`;
      const keys = await blobKeys(blobs);
      await stage(other.id, nar);
      const second = await finalize(other.id, nar, other.key);
      t.equal(second.fileHash, elsewhere, 'the stored file is what the cache serves');
      t.same(await blobKeys(blobs), keys, 'no blob was added');
      t.match((await nars.reads.narinfo(other.id, nar.hash))!.toString(), `URL: nar/${elsewhere}.nar.zst`);
    });

    t.test('another NAR of a store path a cache holds is refused there, and kept apart elsewhere', async (t) => {
      const nar = await makeTestNar(t, { v: 'one\n' });
      await stage(main.id, nar);
      await finalize(main.id, nar);
      const rebuilt = await makeTestNar(t, { v: 'two\n' });
      const sameName = { ...rebuilt, hash: nar.hash, info: { ...rebuilt.info, storePath: nar.info.storePath } };
      await stage(main.id, sameName);
      await t.rejects(finalize(main.id, sameName), { kind: 'path_exists', message: /already holds .* with NarHash/ });
      t.ok(await nars.uploads.staged(main.id, nar.hash), 'the staging stays');
      await nars.uploads.abandon(main.id, nar.hash);
      await stage(other.id, sameName);
      t.equal((await finalize(other.id, sameName, other.key)).status, 'added');
      const [paths] = await sql<{ n: string }[]>`select count(*) as n from cached_paths where hash_part = ${nar.hash}`;
      t.equal(Number(paths!.n), 2, 'two versions, one per cache');
      const served = parseNarinfo((await nars.reads.narinfo(other.id, nar.hash))!.toString());
      t.equal(served.ok && served.value.narHash, rebuilt.info.narHash, 'each cache serves its own version');
    });

    t.test('a chunk at the wrong offset appends nothing and says how many bytes are staged', async (t) => {
      const nar = await makeTestNar(t, { f: 'x'.repeat(3000) });
      await nars.uploads.appendChunk(main.id, nar.hash, 0, chunksOf(nar.nar.subarray(0, 1000)));
      const wrong = nars.uploads.appendChunk(main.id, nar.hash, 500, chunksOf(nar.nar.subarray(500, 1500)));
      await t.rejects(wrong, { kind: 'offset_mismatch', bytesStaged: 1000, message: /1000 bytes are staged; send the chunk at offset=1000/ });
      await t.rejects(nars.uploads.appendChunk(other.id, nar.hash, 10, chunksOf(Buffer.from('x'))), { kind: 'offset_mismatch', bytesStaged: 0, message: /0 bytes are staged/ }, 'nothing staged: offset 0 is the only start');
      t.equal((await nars.uploads.staged(main.id, nar.hash))?.bytesStaged, 1000);
      await nars.uploads.appendChunk(main.id, nar.hash, 1000, chunksOf(nar.nar.subarray(1000)));
      t.equal((await finalize(main.id, nar)).status, 'added', 'the upload resumes from the staged count');
    });

    t.test('finalize before the last byte: incomplete, resumable', async (t) => {
      const nar = await makeTestNar(t, { f: 'y'.repeat(3000) });
      await nars.uploads.appendChunk(main.id, nar.hash, 0, chunksOf(nar.nar.subarray(0, 2000)));
      await t.rejects(finalize(main.id, nar), { kind: 'incomplete_upload', bytesStaged: 2000, message: new RegExp(`2000 of the ${nar.nar.length} bytes`) });
      await nars.uploads.appendChunk(main.id, nar.hash, 2000, chunksOf(nar.nar.subarray(2000)));
      t.equal((await finalize(main.id, nar)).status, 'added');
    });

    t.test('a NAR that contradicts its narinfo stores nothing and can be finalized again with the right one', async (t) => {
      const nar = await makeTestNar(t, { f: 'z'.repeat(100) });
      await stage(main.id, nar);
      const rowsBefore = await countRows(sql);
      const keysBefore = await blobKeys(blobs);
      const wrongHash = { ...nar.info, narHash: 'sha256:0000000000000000000000000000000000000000000000000000' };
      await t.rejects(finalize(main.id, nar, main.key, wrongHash), { kind: 'nar_mismatch', message: /^NarHash: the NAR hashes to sha256:/ });
      await t.rejects(finalize(main.id, nar, main.key, { ...nar.info, narSize: nar.info.narSize - 8 }), { kind: 'nar_mismatch', message: /NarSize/ });
      const invented = { ...nar.info, references: ['2wgwwrzq33820k7hi44rfakjcgd5cyrc-kiln-fixture-file'] };
      await t.rejects(finalize(main.id, nar, main.key, invented), { kind: 'nar_mismatch', message: /References: 2wgwwrzq33820k7hi44rfakjcgd5cyrc-kiln-fixture-file does not occur in the NAR/ });
      t.same(await countRows(sql), rowsBefore, 'no rows');
      t.same(await blobKeys(blobs), keysBefore, 'no blob');
      t.equal((await finalize(main.id, nar)).status, 'added', 'the staged bytes are still there');
    });

    t.test('references that occur in the NAR are accepted, a self-reference included', async (t) => {
      const dep = '/nix/store/2wgwwrzq33820k7hi44rfakjcgd5cyrc-kiln-fixture-file';
      const nar = await makeTestNar(t, { dep: `${dep}\n` }, ['2wgwwrzq33820k7hi44rfakjcgd5cyrc-kiln-fixture-file'], 'with-refs', true);
      await stage(main.id, nar);
      t.equal((await finalize(main.id, nar)).status, 'added');
      const parsed = parseNarinfo((await nars.reads.narinfo(main.id, nar.hash))!.toString());
      t.same(parsed.ok && parsed.value.references, ['2wgwwrzq33820k7hi44rfakjcgd5cyrc-kiln-fixture-file', `${nar.hash}-with-refs`].sort());
    });

    t.test('bytes that are not a NAR are refused as such', async (t) => {
      const nar = await makeTestNar(t, { f: 'q' });
      const garbage = { ...nar, nar: Buffer.from('definitely not a NAR archive, just text that goes on a while') };
      await stage(main.id, garbage);
      await t.rejects(finalize(main.id, garbage, main.key, { ...nar.info, narSize: garbage.nar.length }), { kind: 'invalid_nar', message: /^invalid NAR at byte 0: / });
    });

    t.test('whole files in every compression Nix may upload, and one it may not', async (t) => {
      const nar = await makeTestNar(t, { f: 'compressed '.repeat(1000) });
      const xz = execFileSync('xz', ['-c'], { input: nar.nar });
      const cases: [string, string, Buffer][] = [
        ['zst', 'zstd', zstdCompressSync(nar.nar)],
        ['xz', 'xz', xz],
        ['gz', 'gzip', gzipSync(nar.nar)],
        ['br', 'br', brotliCompressSync(nar.nar)],
      ];
      for (const [extension, compression, bytes] of cases) {
        const cache = await s.cache(`c-${extension}`);
        const key = `nar/abc${extension}.nar.${extension}`;
        await nars.uploads.stageWhole(cache.id, key, compression, chunksOf(bytes));
        const outcome = await nars.uploads.finalize({ cacheId: cache.id, uploadKey: key, signingKey: cache.key, info: { ...nar.info, compression } });
        t.equal(outcome.narHash, nar.info.narHash, `${compression} decompressed and verified`);
      }
      const lz4 = await s.cache('c-lz4');
      await nars.uploads.stageWhole(lz4.id, 'nar/abc.nar.lz4', 'lz4', chunksOf(Buffer.from('whatever')));
      await t.rejects(nars.uploads.finalize({ cacheId: lz4.id, uploadKey: 'nar/abc.nar.lz4', signingKey: lz4.key, info: { ...nar.info, compression: 'lz4' } }), { kind: 'unsupported_compression', message: /unsupported compression "lz4"/ });
      const bad = await s.cache('c-badxz');
      await nars.uploads.stageWhole(bad.id, 'nar/bad.nar.xz', 'xz', chunksOf(xz.subarray(0, xz.length - 20)));
      await t.rejects(nars.uploads.finalize({ cacheId: bad.id, uploadKey: 'nar/bad.nar.xz', signingKey: bad.key, info: { ...nar.info, compression: 'xz' } }), { kind: 'invalid_nar', message: /not valid xz/ });
    });

    t.test('a NAR of several frames is stored the same way whichever path brings it', async (t) => {
      // 40 MiB: three frames, compressed in the background while chunks arrive, in parallel at
      // finalize for a single file, and in one pass for a compressed upload. All three must agree.
      const pattern = Buffer.alloc(1 << 20);
      for (let i = 0; i < pattern.length; i++) pattern[i] = (i * 7919) % 251;
      const big = await makeTestNar(t, { a: Buffer.concat(Array.from({ length: 20 }, () => pattern)), b: randomBytes(20 << 20) }, [], 'big');
      const viaChunks = await stage(main.id, big, 5 << 20);
      t.equal(viaChunks, big.nar.length);
      const chunked = await finalize(main.id, big);
      const second = { ...big, hash: `9${big.hash.slice(1)}`, info: { ...big.info, storePath: big.info.storePath.replace(big.hash, `9${big.hash.slice(1)}`) } };
      const staged = await nars.uploads.stageTemporary(chunksOf(big.nar, 1 << 20));
      const single = await nars.uploads.ingestFile({ cacheId: main.id, signingKey: main.key, info: second.info, file: staged.file, compression: 'none' });
      const third = { ...big, hash: `8${big.hash.slice(1)}`, info: { ...big.info, storePath: big.info.storePath.replace(big.hash, `8${big.hash.slice(1)}`), compression: 'zstd' } };
      await nars.uploads.stageWhole(main.id, 'nar/big.nar.zst', 'zstd', chunksOf(zstdCompressSync(big.nar), 1 << 20));
      const compressed = await nars.uploads.finalize({ cacheId: main.id, uploadKey: 'nar/big.nar.zst', signingKey: main.key, info: third.info });
      t.equal(single.fileHash, chunked.fileHash, 'single-shot: same file');
      t.equal(compressed.fileHash, chunked.fileHash, 'single pass over a compressed upload: same file');
      const stored = await readBlob(blobs, narBlobKey(chunked.fileHash));
      t.same(execFileSync('zstd', ['-d', '-c'], { input: stored, maxBuffer: 1 << 27 }).equals(big.nar), true, 'zstd reads the frames back as the NAR');
      t.same(await unzstd(stored), big.nar, 'and so does decompressNar');
    });

    t.test('more than nar.maxUploadSize is refused while it streams', async (t) => {
      const nar = await makeTestNar(t, { f: 'w' });
      const huge = (async function* () {
        for (let i = 0; i < 70; i++) yield Buffer.alloc(1 << 20);
      })();
      await t.rejects(nars.uploads.appendChunk(main.id, nar.hash, 0, huge), { kind: 'upload_too_large', message: /exceeds the limit of 67108864 bytes \(nar.maxUploadSize\)/ });
      t.equal((await nars.uploads.staged(main.id, nar.hash))?.bytesStaged, 0, 'nothing of it counts');
    });

    t.test('a failing blob store leaves no row, and the upload can be finalized again', async (t) => {
      const nar = await makeTestNar(t, { f: 'durable?\n' });
      await stage(main.id, nar);
      const rowsBefore = await countRows(sql);
      const put = blobs.put.bind(blobs);
      blobs.put = async () => {
        throw new Error('disk full (simulated)');
      };
      try {
        await t.rejects(finalize(main.id, nar), { message: 'disk full (simulated)' });
      } finally {
        blobs.put = put;
      }
      t.same(await countRows(sql), rowsBefore, 'no row points at a blob that was never stored');
      t.equal((await finalize(main.id, nar)).status, 'added');
    });
  });
}
