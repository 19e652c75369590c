// A finalize refused after the frames of a partial last frame were made, then more chunks, then
// the right narinfo: the stored file must be the whole NAR. (Frame files once outlived the refusal
// and the stale last frame was joined in: the blob was cut short, and every cache that uploaded
// the same path later was signed onto it.)
import { randomBytes } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import t from 'tap';
import { narBlobKey } from '../../../storage/index.js';
import { makeTestNar, openTestNarStorage } from '../../support/narStorage.js';

const one = (bytes: Uint8Array) => [bytes] as unknown as AsyncIterable<Uint8Array>;

t.test('a refused finalize, more chunks, then the right finalize: the stored file is the NAR', async (t) => {
  const { nars, blobs, cache: makeCache } = await openTestNarStorage(t, 'fs');
  const nar = await makeTestNar(t, { a: randomBytes(3 << 20), b: 'small\n' }, [], 'stale-frame');
  const first = await makeCache('first');
  const cut = 1 << 20; // not a multiple of the 16 MiB frame: frame 0 is partial

  // The first MiB, and a finalize whose narinfo claims that is all: refused (4xx), frames made.
  await nars.uploads.appendChunk(first.id, nar.hash, 0, one(nar.nar.subarray(0, cut)));
  await t.rejects(
    nars.uploads.finalize({ cacheId: first.id, uploadKey: nar.hash, signingKey: first.key, info: { ...nar.info, narSize: cut } }),
    { kind: 'invalid_nar', message: /invalid NAR/ },
  );
  // The rest, and the truthful narinfo.
  await nars.uploads.appendChunk(first.id, nar.hash, cut, one(nar.nar.subarray(cut)));
  const outcome = await nars.uploads.finalize({ cacheId: first.id, uploadKey: nar.hash, signingKey: first.key, info: nar.info });
  t.equal(outcome.narHash, nar.info.narHash, 'accepted under the true NarHash');

  const read = await blobs.get(narBlobKey(outcome.fileHash));
  const pieces: Uint8Array[] = [];
  for await (const piece of read!.body) pieces.push(Buffer.from(piece));
  const served = execFileSync('zstd', ['-d', '-c'], { input: Buffer.concat(pieces), maxBuffer: 1 << 26 });
  t.equal(served.length, nar.nar.length, 'the stored file decompresses to the whole NAR');
  t.ok(served.equals(nar.nar), 'the stored file is the NAR');

  // Another tenant uploading the very same path gets the same stored row.
  const second = await makeCache('second');
  await nars.uploads.appendChunk(second.id, nar.hash, 0, one(nar.nar));
  const other = await nars.uploads.finalize({ cacheId: second.id, uploadKey: nar.hash, signingKey: second.key, info: nar.info });
  const again = await blobs.get(narBlobKey(other.fileHash));
  const more: Uint8Array[] = [];
  for await (const piece of again!.body) more.push(Buffer.from(piece));
  t.ok(execFileSync('zstd', ['-d', '-c'], { input: Buffer.concat(more), maxBuffer: 1 << 26 }).equals(nar.nar), 'a second cache uploading the right bytes is served the NAR');
});
