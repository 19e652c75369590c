// The shared slots compressed frames come back in (storage/nars/frameSlots.ts), the join's promise
// to hand each frame's bytes back exactly once (a slot handed back twice would be written by two
// frames at once), and the join's background fdatasync (storage/nars/frameJoin.ts).
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { sha256Nix32 } from '../../../protocol/index.js';
import { FrameJoin } from '../../../storage/nars/frameJoin.js';
import { FrameSlots, FRAME_SLOT_BYTES } from '../../../storage/nars/frameSlots.js';

t.test('slots: at most max in use, given back ones are reused', async (t) => {
  const slots = new FrameSlots(2);
  const a = slots.take();
  const b = slots.take();
  t.ok(a instanceof SharedArrayBuffer && b instanceof SharedArrayBuffer && a !== b, 'two slots');
  t.equal(a!.byteLength, FRAME_SLOT_BYTES, 'each holds a whole frame at worst');
  t.equal(slots.take(), undefined, 'a third is refused: the frame comes back in its own buffer');
  slots.give(a!);
  t.equal(slots.take(), a, 'the slot given back is taken again, not a new one');
  t.equal(slots.take(), undefined, 'and the limit still holds');
});

t.test('the join hands every frame back once: written, offered late, or dropped on failure', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'kiln-join-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const done: Uint8Array[] = [];
  const frame = (byte: number) => new Uint8Array(1000).fill(byte);
  const joined = new FrameJoin(join(dir, 'joined'), () => undefined, (bytes) => done.push(bytes));
  const [f0, f1, f2, f3] = [frame(0), frame(1), frame(2), frame(3)];
  joined.offer(1, f1); // waits for frame 0
  joined.offer(0, f0);
  await joined.idle();
  t.same(done, [f0, f1], 'frames 0 and 1 handed back once written, in order');
  joined.offer(1, frame(9));
  t.equal(done.length, 3, 'a frame offered again after it was written is handed back at once');
  joined.offer(3, f3); // waits for frame 2, which never comes
  joined.fail(new Error('a frame failed'));
  t.equal(done.at(-1), f3, 'a waiting frame is handed back when the join fails');
  joined.offer(2, f2);
  t.equal(done.at(-1), f2, 'and so is a frame offered after the failure');
  t.equal(done.length, 5, 'each frame exactly once');
  t.equal(new Set(done).size, 5);
  await joined.discard();
  await t.rejects(readFile(join(dir, 'joined')), 'the partial file is gone');
});

t.test('a join past the background sync threshold: the file is the frames in order, and a discard during a sync removes it', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'kiln-join-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const frames = [0, 1, 2, 3, 4].map((n) => Buffer.alloc((17 << 20) + n, n + 1)); // 85 MiB: one background fdatasync at least
  const joined = new FrameJoin(join(dir, 'joined'));
  for (const [index, bytes] of frames.entries()) joined.offer(index, bytes);
  const output = join(dir, 'stored');
  const { fileHash, fileSize } = await joined.finish(frames.length, output);
  const whole = Buffer.concat(frames);
  t.equal(fileSize, whole.length);
  t.ok((await readFile(output)).equals(whole), 'the stored file is the frames in order');
  t.equal(fileHash, sha256Nix32(createHash('sha256').update(whole).digest()).slice('sha256:'.length), 'FileHash is the hash of those bytes');

  const dropped = new FrameJoin(join(dir, 'dropped'));
  for (const [index, bytes] of frames.entries()) dropped.offer(index, bytes);
  await dropped.idle();
  await dropped.discard();
  await t.rejects(readFile(join(dir, 'dropped')), 'a discarded join leaves no file, whatever sync was running');
});

t.test('slots: one handed back twice, or never handed out, is not taken twice; a dropped one is never reused', async (t) => {
  const slots = new FrameSlots(2);
  const a = slots.take()!;
  slots.give(a);
  slots.give(a); // a bug elsewhere: must not put it in spare twice
  const first = slots.take();
  const second = slots.take();
  t.equal(first, a);
  t.not(second, a, 'the second take is another slot, not `a` again');
  slots.give(new SharedArrayBuffer(8)); // not one of ours
  t.equal(slots.inUse, 2);
  slots.drop(first!);
  t.equal(slots.inUse, 1, 'a dropped slot no longer counts');
  const third = slots.take();
  t.ok(third !== undefined && third !== first, 'and is never handed out again');
});
