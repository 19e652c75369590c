// The worker/serve protocol's byte format (protocol/nix/workerWire.ts): round trips, and the
// malformed input a hostile SSH client may send: short streams, non-zero padding, absurd lengths
// and frames, integers past 2^53, string lists past 32 MiB in total, a path with more references
// than the HTTP upload allows.
import t from 'tap';
import { readImportedPathInfo, WireError, WireReader, wireString, wireStrings, wireU64 } from '../../../protocol/index.js';

const reader = (...chunks: Buffer[]) => new WireReader(chunks);

t.test('round trips across chunk boundaries', async (t) => {
  const bytes = Buffer.concat([wireU64(7), wireString('/nix/store/abc'), wireStrings(['a', 'bcdefghij']), wireU64(3), Buffer.from('xyz'), wireU64(0)]);
  // one byte a chunk: every read spans chunks
  const r = new WireReader([...bytes].map((b) => Buffer.from([b])));
  t.equal(await r.u64(), 7);
  t.equal(await r.string(), '/nix/store/abc');
  t.same(await r.strings(), ['a', 'bcdefghij']);
  const frames: string[] = [];
  for await (const f of r.frames(16)) frames.push(f.toString());
  t.equal(frames.join(''), 'xyz', 'a framed stream up to its empty frame');
  t.ok(await r.atEnd());
});

t.test('malformed input is a WireError, never a hang or a huge allocation', async (t) => {
  await t.rejects(reader(Buffer.alloc(5)).u64(), WireError, 'a short integer');
  await t.rejects(reader(wireU64(10), Buffer.from('abc')).string(), WireError, 'a short string');
  await t.rejects(reader(wireU64(1), Buffer.from([0x61, 1, 0, 0, 0, 0, 0, 0])).string(), /non-zero padding/);
  await t.rejects(reader(wireU64(1 << 30)).string(), /longer than/, 'a 1 GiB string is refused before it is read');
  await t.rejects(reader(wireU64(1e9)).strings(), /longer than/, 'a billion-entry list is refused');
  const mib = wireString(Buffer.alloc(1 << 20, 0x61));
  const bigList = (count: number) => new WireReader((function* () {
    yield wireU64(count);
    for (let i = 0; i < count; i++) yield mib; // the same buffer each time: the test itself holds 1 MiB
  })());
  t.equal((await bigList(32).strings()).length, 32, 'a list of 32 MiB of strings is read');
  await t.rejects(bigList(33).strings(), /add up to more than 33554432 bytes/, 'one more MiB is refused before it is read');
  await t.rejects(reader(Buffer.from([0, 0, 0, 0, 0, 0, 0, 0x80])).u64(), /out of range/);
  const frames = reader(wireU64(1 << 30)).frames(1 << 20);
  await t.rejects(frames.next(), /longer than/, 'an oversized frame');
  const cut = reader(wireU64(100), Buffer.alloc(10)).frames(1 << 20);
  await cut.next();
  await t.rejects(cut.next(), /ended in the middle of a frame/, 'a frame cut short');
});

t.test('a path\'s info with more references than an HTTP upload may name is a WireError', async (t) => {
  const info = (references: string[]) => reader(wireString('/nix/store/0c6kzph7l0dcbfmjap64f0czdafn3b7x-a'), wireString(''),
    wireString('sha256:0c6kzph7l0dcbfmjap64f0czdafn3b7x0c6kzph7l0dcbfmjap6'), wireStrings(references), wireU64(0), wireU64(8), wireU64(0), wireStrings([]), wireString(''));
  t.same((await readImportedPathInfo(info(['/nix/store/x', '/nix/store/y']))).references, ['/nix/store/x', '/nix/store/y']);
  // 100,001 short entries: 1.6 MB on the wire, far under the list's 32 MiB byte cap
  await t.rejects(readImportedPathInfo(info(Array.from({ length: 100_001 }, () => 'r'))), WireError);
});
