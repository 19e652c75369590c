import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { decompressNar, isNarCompression, NAR_COMPRESSIONS, narFileExtension, parseNarinfo } from '../../../protocol/nix/index.js';
import { buildFixturePaths, nixCopyToFileCache, nixStoreDump, tempDir } from '../../support/nixStore.js';

const fixtures = buildFixturePaths();
const paths = [fixtures.tree, fixtures.file, fixtures.symlink];
const work = tempDir('kiln-decompress-');

const collect = async (source: AsyncIterable<Uint8Array>): Promise<Buffer> => {
  const parts: Uint8Array[] = [];
  for await (const chunk of source) parts.push(chunk);
  return Buffer.concat(parts);
};
async function* chunks(bytes: Uint8Array, size: number): AsyncGenerator<Uint8Array> {
  for (let at = 0; at < bytes.length; at += size) yield bytes.subarray(at, at + size);
}

t.test('decompresses what nix copy uploaded in every compression it offers', async (t) => {
  for (const compression of NAR_COMPRESSIONS) {
    const cache = nixCopyToFileCache(join(work, compression), paths, { compression });
    for (const name of readdirSync(cache).filter((n) => n.endsWith('.narinfo'))) {
      const info = parseNarinfo(readFileSync(join(cache, name), 'utf8'));
      if (!info.ok) throw new Error(info.reason);
      t.equal(info.value.compression, compression);
      const file = readFileSync(join(cache, info.value.url));
      const nar = await collect(decompressNar(chunks(file, 777), info.value.compression));
      t.ok(nar.equals(nixStoreDump(info.value.storePath)), `${compression}: ${info.value.storePath}`);
      if (compression !== 'gzip') t.ok(info.value.url.endsWith(narFileExtension(compression)), `${compression} extension`);
    }
  }
});

t.test('a larger file through every decompressor, in small chunks', async (t) => {
  const nar = nixStoreDump(fixtures.tree);
  const compressed: Record<string, Buffer> = {
    zstd: execFileSync('zstd', ['-c', '-1'], { input: nar }),
    xz: execFileSync('xz', ['-c'], { input: nar }),
    bzip2: execFileSync('bzip2', ['-c'], { input: nar }),
  };
  for (const [compression, file] of Object.entries(compressed)) {
    t.ok((await collect(decompressNar(chunks(file, 100), compression))).equals(nar), compression);
  }
});

t.test('corrupt or truncated input is an error naming the compression', async (t) => {
  const nar = nixStoreDump(fixtures.tree);
  for (const [compression, tool] of [['zstd', 'zstd'], ['xz', 'xz'], ['bzip2', 'bzip2'], ['gzip', 'gzip'], ['br', undefined]] as const) {
    const garbage = Buffer.from('this is not compressed data at all, not even a little bit');
    await t.rejects(collect(decompressNar([garbage], compression)), new RegExp(`^${compression} data is corrupt`), `${compression}: garbage`);
    if (!tool) continue;
    const file = execFileSync(tool, ['-c'], { input: nar });
    await t.rejects(collect(decompressNar([file.subarray(0, file.length >> 1)], compression)), new RegExp(`^${compression} data is corrupt`), `${compression}: truncated`);
  }
});

t.test('limits, unknown compressions, and source errors', async (t) => {
  const nar = nixStoreDump(fixtures.tree);
  const file = execFileSync('zstd', ['-c'], { input: nar });
  await t.rejects(collect(decompressNar([file], 'zstd', { maxOutputBytes: 1000 })), /zstd data expands beyond 1000 bytes/);
  t.ok((await collect(decompressNar([nar], '', { maxOutputBytes: nar.length }))).equals(nar), 'an empty Compression means none');
  t.throws(() => decompressNar([nar], 'lz4'), /unsupported compression "lz4"; supported: none, zstd, xz, bzip2, br, gzip/);
  t.ok(isNarCompression('xz'));
  t.notOk(isNarCompression('lz4'));
  const broken = new Error('socket closed');
  const failing = async function* () {
    yield file.subarray(0, 10);
    throw broken;
  };
  for (const compression of ['zstd', 'xz', 'none']) await t.rejects(collect(decompressNar(failing(), compression)), broken, `${compression} passes source errors through`);
});

// 401 bytes of bzip2 -9 that expand to 500 MiB of zeros (eleven streams of one block each).
const BZIP2_BOMB = Buffer.from(
  'QlpoOTFBWSZTWQ4J4t8BX45AAMAAAAggADCATUZCoCWpCoCXMUFZJlNZDgni3wFfjkAAwAAACCAAMIBNRkKgJakKgJcxQVkmU1kOCeLfAV+OQADAAAAIIAAwgE1GQqAlqQqAlzFBWSZTWQ4J4t8BX45AAMAAAAggADCATUZCoCWpCoCXMUFZJlNZDgni3wFfjkAAwAAACCAAMIBNRkKgJakKgJcxQVkmU1kOCeLfAV+OQADAAAAIIAAwgE1GQqAlqQqAlzFBWSZTWQ4J4t8BX45AAMAAAAggADCATUZCoCWpCoCXMUFZJlNZDgni3wFfjkAAwAAACCAAMIBNRkKgJakKgJcxQVkmU1kOCeLfAV+OQADAAAAIIAAwgE1GQqAlqQqAlzFBWSZTWQ4J4t8BX45AAMAAAAggADCATUZCoCWpCoCXMUFZJlNZDgni3wFfjkAAwAAACCAAMIBNRkKgJakKgJcxQVkmU1lht6HQAJSQQgDAAAAIAAggADDMBSmmBESNiCIkeLuSKcKEhwLtlyg=',
  'base64',
);

t.test('a bzip2 bomb stops at the output budget, inside the block that passes it', async (t) => {
  // The package's own stream decoded every block of a small file in one synchronous call, one
  // JavaScript number per byte: this file took minutes and gigabytes before any limit was looked at.
  await t.rejects(collect(decompressNar([BZIP2_BOMB], 'bzip2', { maxOutputBytes: 1000 })), /^bzip2 data expands beyond 1000 bytes$/);
  await t.rejects(collect(decompressNar(chunks(BZIP2_BOMB, 7), 'bzip2', { maxOutputBytes: 10 << 20 })), /^bzip2 data expands beyond 10485760 bytes$/, 'in small chunks');
  // A consumer that stops (ingestNar at a byte that is no NAR) ends it too: one block decoded, not eleven.
  let first = 0;
  for await (const chunk of decompressNar([BZIP2_BOMB], 'bzip2')) {
    first = chunk.length;
    break;
  }
  t.equal(first, 1 << 20, 'output comes in 1 MiB pieces as each block is decoded');
});

t.test('bzip2: concatenated streams (pbzip2), empty input, trailing garbage', async (t) => {
  const a = Buffer.from('first stream\n');
  const b = Buffer.from('second stream\n');
  const both = Buffer.concat([execFileSync('bzip2', ['-c'], { input: a }), execFileSync('bzip2', ['-c'], { input: b })]);
  t.ok((await collect(decompressNar(chunks(both, 5), 'bzip2'))).equals(Buffer.concat([a, b])));
  await t.rejects(collect(decompressNar([], 'bzip2')), /^bzip2 data is corrupt: the input is empty/);
  await t.rejects(collect(decompressNar([both, Buffer.from('garbage')], 'bzip2')), /^bzip2 data is corrupt/);
});
