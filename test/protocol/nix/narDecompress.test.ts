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
