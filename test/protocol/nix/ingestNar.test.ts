import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import {
  decompressNar,
  hashNar,
  ingestNar,
  NarError,
  parseNarinfo,
  renderNarinfo,
  renderNarListing,
  sha256Nix32,
  signNarinfo,
  SigningKey,
  toNix32Hash,
  verifyNar,
  type Narinfo,
} from '../../../protocol/nix/index.js';
import { dumpNar } from '../../../worker/index.js';
import { buildFixturePaths, nixCopyToFileCache, nixPathInfo, nixStoreDump, nixVerifyInCache, tempDir } from '../../support/nixStore.js';

const fixtures = buildFixturePaths();
const paths = Object.values(fixtures);
const work = tempDir('kiln-ingest-');
const nixCache = nixCopyToFileCache(join(work, 'nix'), paths, { compression: 'zstd', 'write-nar-listing': 'true' });
// Uncompressed, Nix's file is the NAR itself: every narinfo field is then fixed by the store path
// alone, whichever zstd library either side has, so ours must match it whole, every time.
const nixPlainCache = nixCopyToFileCache(join(work, 'nix-plain'), paths, { compression: 'none' });

const collect = async (source: AsyncIterable<Uint8Array>): Promise<Buffer> => {
  const parts: Uint8Array[] = [];
  for await (const chunk of source) parts.push(chunk);
  return Buffer.concat(parts);
};

t.test('one pass gives what Nix says: NarHash, NarSize, the .ls, and a zstd file with its hash', async (t) => {
  for (const path of paths) {
    const parts: Uint8Array[] = [];
    const result = await ingestNar(dumpNar(path), async (chunk) => void parts.push(Buffer.from(chunk)));
    const file = Buffer.concat(parts);
    const info = nixPathInfo(path);
    t.equal(result.narHash, toNix32Hash(info.narHash), `${path} NarHash`);
    t.equal(result.narSize, info.narSize, 'NarSize');
    t.equal(renderNarListing(result.listing), readFileSync(join(nixCache, `${path.slice(11, 43)}.ls`), 'utf8'), 'listing');
    t.equal(result.fileSize, file.length, 'FileSize');
    t.equal(result.fileHash, sha256Nix32(createHash('sha256').update(file).digest()), 'FileHash');
    t.ok(execFileSync('zstd', ['-d', '-c'], { input: file }).equals(nixStoreDump(path)), 'the zstd CLI decompresses it to the NAR');
  }
});

t.test('Nix accepts a binary cache made only of our bytes: narinfo, signature, zstd NAR', async (t) => {
  const key = SigningKey.generate('kiln-ingest-1');
  const cache = join(work, 'ours');
  mkdirSync(join(cache, 'nar'), { recursive: true });
  writeFileSync(join(cache, 'nix-cache-info'), 'StoreDir: /nix/store\n');
  for (const path of paths) {
    const parts: Uint8Array[] = [];
    const result = await ingestNar(dumpNar(path), async (chunk) => void parts.push(chunk));
    const url = `nar/${result.fileHash.slice(7)}.nar.zst`;
    writeFileSync(join(cache, url), Buffer.concat(parts));
    const info = nixPathInfo(path);
    const narinfo: Narinfo = {
      storePath: path,
      url,
      compression: 'zstd',
      fileHash: result.fileHash,
      fileSize: result.fileSize,
      narHash: result.narHash,
      narSize: result.narSize,
      references: info.references.map((r) => r.slice(11)),
      sigs: [],
    };
    if (info.deriver) narinfo.deriver = info.deriver.slice(11);
    narinfo.sigs.push(signNarinfo(narinfo, key));
    writeFileSync(join(cache, `${path.slice(11, 43)}.narinfo`), renderNarinfo(narinfo));
    writeFileSync(join(cache, `${path.slice(11, 43)}.ls`), renderNarListing(result.listing));

    // Nix's zstd file may differ from ours (another zstd version): apart from its URL, FileHash and FileSize, the narinfo may not.
    const theirs = parseNarinfo(readFileSync(join(nixCache, `${path.slice(11, 43)}.narinfo`), 'utf8'));
    if (!theirs.ok) throw new Error(`Nix's narinfo of ${path}: ${theirs.field}: ${theirs.reason}`);
    const { url: theirUrl, fileHash: theirHash, fileSize: theirSize } = theirs.value;
    t.equal(renderNarinfo({ ...narinfo, url: theirUrl, fileHash: theirHash!, fileSize: theirSize!, sigs: [] }), renderNarinfo(theirs.value), `${path}: the zstd narinfo, file fields aside`);

    const plain = await ingestNar(dumpNar(path), async () => undefined, { compression: 'none' });
    const ours = renderNarinfo({ ...narinfo, url: `nar/${plain.fileHash.slice(7)}.nar`, compression: 'none', fileHash: plain.fileHash, fileSize: plain.fileSize, sigs: [] });
    t.equal(ours, readFileSync(join(nixPlainCache, `${path.slice(11, 43)}.narinfo`), 'utf8'), `${path}: the uncompressed narinfo, byte for byte`);
  }
  const verified = nixVerifyInCache(cache, paths, key.publicKey.toString());
  t.equal(verified.status, 0, verified.output);
});

t.test('compression none hands the NAR itself to the sink', async (t) => {
  const nar = nixStoreDump(fixtures.tree);
  const parts: Uint8Array[] = [];
  const result = await ingestNar([nar.subarray(0, 1000), nar.subarray(1000)], async (c) => void parts.push(c), { compression: 'none' });
  t.ok(Buffer.concat(parts).equals(nar));
  t.equal(result.fileHash, result.narHash);
  t.equal(result.fileSize, nar.length);
  t.equal(result.compression, 'none');
});

t.test('a malformed NAR rejects with a NarError; a failing sink rejects with its own error', async (t) => {
  const nar = nixStoreDump(fixtures.tree);
  const cut = nar.subarray(0, nar.length - 9);
  for (const compression of ['zstd', 'none'] as const) {
    await t.rejects(ingestNar([cut], async () => undefined, { compression }), NarError, compression);
    await t.rejects(ingestNar([Buffer.concat([nar, Buffer.from('x')])], async () => undefined, { compression }), /trailing garbage/);
  }
  const full = new Error('disk full');
  await t.rejects(ingestNar([nar], async () => { throw full; }), full);
  await t.rejects(ingestNar([nar], async () => undefined, { limits: { maxNarSize: 1000 } }), /larger than the limit of 1000 bytes/);
});

t.test('zstd levels trade size for speed; the result still decompresses', async (t) => {
  const nar = nixStoreDump(fixtures.tree);
  const sizes: number[] = [];
  for (const zstdLevel of [1, 19]) {
    const parts: Uint8Array[] = [];
    const result = await ingestNar([nar], async (c) => void parts.push(c), { zstdLevel, chunkBytes: 4096 });
    sizes.push(result.fileSize);
    t.ok((await collect(decompressNar([Buffer.concat(parts)], 'zstd'))).equals(nar));
  }
  t.ok(sizes[1]! <= sizes[0]!, `level 19 (${sizes[1]}) no larger than level 1 (${sizes[0]})`);
});

t.test('verifyNar checks a staged NAR against its narinfo', async (t) => {
  const nar = nixStoreDump(fixtures.refs);
  const expected = await hashNar([nar]);
  t.same(await verifyNar([nar], expected), { ok: true, value: expected });
  t.match(await verifyNar([nar], { ...expected, narSize: expected.narSize + 8 }), { ok: false, field: 'NarSize', reason: /the NAR has \d+ bytes, the narinfo says/ }, 'shorter than announced');
  t.match(await verifyNar([nar], { ...expected, narSize: expected.narSize - 8 }), { ok: false, field: 'NarSize', reason: /longer than the announced/ });
  const other = await hashNar([nixStoreDump(fixtures.file)]);
  t.match(await verifyNar([nar], { ...expected, narHash: other.narHash }), { ok: false, field: 'NarHash', reason: /the NAR hashes to/ });
  t.match(await verifyNar([Buffer.from('garbage!')], expected), { ok: false, field: 'nar', reason: /invalid NAR at byte 0/ });
  const padded = Buffer.concat([nar, Buffer.alloc(8)]);
  t.match(await verifyNar([padded], { narHash: expected.narHash, narSize: padded.length }), { ok: false, field: 'nar', reason: /trailing garbage/ });
  const broken = new Error('read failed');
  await t.rejects(verifyNar((async function* () { throw broken; })(), expected), broken, 'source errors are thrown, not blamed on the uploader');
});
