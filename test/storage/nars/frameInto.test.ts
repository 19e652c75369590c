// Frames compressed straight into a slot (storage/nars/frameInto.ts, through node:zlib's native
// handle) are byte for byte the frames of the public call (narFrames.ts compressFrame): every way
// of ingesting must store the same file for the same NAR, or identical NARs stop deduplicating.
import { randomBytes } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import t from 'tap';
import { compressFrameInto } from '../../../storage/nars/frameInto.js';
import { compressFrame, FRAME_BYTES, zstdCompressBound } from '../../../storage/nars/narFrames.js';

const mixed = (size: number) => {
  const bytes = Buffer.alloc(size, 'nix-store ');
  randomBytes(Math.floor(size / 3)).copy(bytes, Math.floor(size / 3));
  return bytes;
};

t.test('the same bytes as compressFrame, frame after frame on one reused engine', async (t) => {
  const slot = new Uint8Array(new SharedArrayBuffer(zstdCompressBound(FRAME_BYTES)));
  for (const size of [1, 1000, 200 << 10, FRAME_BYTES, 5 << 20, FRAME_BYTES]) {
    const frame = mixed(size);
    for (const level of [1, 3]) {
      const length = compressFrameInto(frame, level, slot);
      t.ok(Buffer.from(slot.subarray(0, length)).equals(compressFrame(frame, level)), `${size} bytes at level ${level}`);
    }
  }
  const frame = randomBytes(1 << 20);
  const length = compressFrameInto(frame, 1, slot);
  t.ok(execFileSync('zstd', ['-d', '-c'], { input: slot.subarray(0, length) }).equals(frame), 'zstd -d gives the frame back (incompressible bytes)');
});

t.test('an output smaller than the worst case is refused before anything is written', async (t) => {
  const frame = mixed(4096);
  const small = new Uint8Array(zstdCompressBound(frame.length) - 1).fill(7);
  t.throws(() => compressFrameInto(frame, 1, small), { name: 'RangeError' });
  t.ok(small.every((b) => b === 7), 'the output is untouched');
  const slot = new Uint8Array(zstdCompressBound(frame.length));
  t.ok(Buffer.from(slot.subarray(0, compressFrameInto(frame, 1, slot))).equals(compressFrame(frame, 1)), 'and the engine still works');
});
