// nix-store --export's format read from a protocol stream (ImportPaths): the NAR is read exactly to
// its own end however the bytes are split (the trailer after it is left for the trailer reader),
// and what is not the format is a WireError naming the problem.
import t from 'tap';
import { EXPORT_MAGIC, exportedNar, nextExportedPath, readExportTrailer, WireError, WireReader, wireString, wireStrings, wireU64 } from '../../../protocol/index.js';
import { makeTestNar } from '../../support/narStorage.js';

function* split(bytes: Buffer, size: number): Generator<Uint8Array> {
  for (let i = 0; i < bytes.length; i += size) yield bytes.subarray(i, i + size);
}

const collect = async (source: AsyncIterable<Uint8Array>): Promise<Buffer> => {
  const parts: Uint8Array[] = [];
  for await (const part of source) parts.push(part);
  return Buffer.concat(parts);
};

const failure = async (work: Promise<unknown>): Promise<unknown> => work.then(() => 'no error', (e: unknown) => e);

t.test('exported paths from a stream', async (t) => {
  const nar = await makeTestNar(t, { a: 'first file\n', b: Buffer.alloc(3000, 7) }, [], 'exported');
  const refs = ['/nix/store/00000000000000000000000000000000-dep'];
  const trailer = Buffer.concat([wireU64(EXPORT_MAGIC), wireString(nar.info.storePath), wireStrings(refs), wireString(''), wireU64(1), wireString('legacy-sig'), wireU64(0)]);
  const stream = Buffer.concat([wireU64(1), nar.nar, trailer]);

  for (const size of [1, 7, 8, 4096, stream.length]) {
    const from = new WireReader(split(stream, size));
    t.equal(await nextExportedPath(from), true);
    t.same(await collect(exportedNar(from, 1 << 20)), nar.nar, `chunks of ${size}: exactly the NAR`);
    t.same(await readExportTrailer(from), { path: nar.info.storePath, references: refs, deriver: '' }, `chunks of ${size}: the trailer after it`);
    t.equal(await nextExportedPath(from), false, `chunks of ${size}: the end`);
  }

  t.test('what is not the format', async (t) => {
    const notExport = await failure(nextExportedPath(new WireReader([wireU64(2)])));
    t.type(notExport, WireError);
    t.match(String(notExport), /not the nix-store --export format/);

    const broken = Buffer.from(nar.nar);
    broken.write('nix-archive-9', 8);
    const badNar = await failure(collect(exportedNar(new WireReader([broken]), 1 << 20)));
    t.type(badNar, WireError, 'a NAR that does not parse');
    t.match(String(badNar), /the NAR of an exported path/);

    const tooLarge = await failure(collect(exportedNar(new WireReader([nar.nar]), 100)));
    t.type(tooLarge, WireError, 'a NAR past the limit');

    const cut = await failure(collect(exportedNar(new WireReader([nar.nar.subarray(0, 200)]), 1 << 20)));
    t.type(cut, WireError, 'a stream that ends inside the NAR');

    const noMagic = await failure(readExportTrailer(new WireReader([wireU64(7)])));
    t.match(String(noMagic), /export magic/);
    const badFlag = await failure(readExportTrailer(new WireReader([trailer.subarray(0, trailer.length - 40), wireU64(5)])));
    t.match(String(badFlag), /legacy signature flag is 5/);
  });
});
