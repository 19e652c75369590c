// The frame sets of staged uploads (storage/nars/narFrameSets.ts) on a real CPU pool: a finalize
// keeps its set whatever other uploads start meanwhile, a set whose frame failed starts over once
// instead of compressing for nothing, and the stored file is the NAR's frames in order.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { createCpuPool, type CpuPool } from '../../../storage/cpuPool.js';
import { NarFrameSets } from '../../../storage/nars/narFrameSets.js';
import { FRAME_BYTES } from '../../../storage/nars/narFrames.js';
import { eventually } from '../../support/eventually.js';

async function setup(t: Test): Promise<{ cpu: CpuPool; base: string; sets: NarFrameSets }> {
  const cpu = createCpuPool({ maxThreads: 2 });
  const base = await mkdtemp(join(tmpdir(), 'kiln-frames-'));
  t.teardown(async () => {
    await cpu.destroy();
    await rm(base, { recursive: true, force: true });
  });
  return { cpu, base, sets: new NarFrameSets(cpu, 1) };
}

const decompressed = async (file: string) => execFileSync('zstd', ['-d', '-c'], { input: await readFile(file), maxBuffer: 1 << 28 });

t.test('a finalize in flight keeps its frames while 64 other uploads start', async (t) => {
  const { base, sets } = await setup(t);
  const source = join(base, 'nar');
  const bytes = randomBytes(1 << 20);
  await writeFile(source, bytes);
  const output = join(base, 'out.zst');
  const finishing = sets.stored(join(base, 'finalizing'), source, bytes.length, output);
  for (let i = 0; i < 64; i++) sets.advance(join(base, `other-${i}`), source, 1000);
  await t.resolves(finishing, 'the finalize gets its stored file');
  t.ok((await decompressed(output)).equals(bytes), 'and it is the NAR');
});

t.test('a set whose frame failed starts over once, and the stored file is right', async (t) => {
  const { cpu, base, sets } = await setup(t);
  const source = join(base, 'nar');
  const dir = join(base, 'upload');
  // The first chunk's frame cannot be read (the file is not there yet): that frame fails.
  sets.advance(dir, source, FRAME_BYTES);
  await eventually(() => cpu.stats().completed >= 1, { interval: 10, message: 'the failing frame task ends' });
  const bytes = randomBytes(3 * FRAME_BYTES + 12345);
  await writeFile(source, bytes);
  const before = cpu.stats().completed;
  sets.advance(dir, source, 2 * FRAME_BYTES);
  sets.advance(dir, source, 3 * FRAME_BYTES);
  const output = join(base, 'out.zst');
  const file = await sets.stored(dir, source, bytes.length, output);
  t.equal(cpu.stats().completed - before, 4, 'each of the four frames compressed once');
  t.equal(file.fileSize, (await readFile(output)).length);
  t.ok((await decompressed(output)).equals(bytes), 'the stored file is the NAR');
  t.equal(sets.slotsInUse, 0, 'every frame slot is back');
});

t.test('uploads finalized at once, more frames than shared slots: each stored file is its own NAR', async (t) => {
  const { base, sets } = await setup(t);
  // Frames of different sizes (half random, half zeros, in varying shares) so that a slot reused
  // too early, or a frame written from the wrong slot, would show in the decompressed bytes.
  const nars = [0, 1, 2].map((n) => {
    const bytes = Buffer.alloc(2 * FRAME_BYTES + 1000 * (n + 1));
    randomBytes(FRAME_BYTES / (n + 2)).copy(bytes, 0);
    randomBytes(FRAME_BYTES / (n + 3)).copy(bytes, FRAME_BYTES + 77);
    return bytes;
  });
  const stored = await Promise.all(nars.map(async (bytes, n) => {
    const source = join(base, `nar-${n}`);
    await writeFile(source, bytes);
    const output = join(base, `out-${n}.zst`);
    await sets.stored(join(base, `upload-${n}`), source, bytes.length, output);
    return output;
  }));
  for (const [n, output] of stored.entries()) t.ok((await decompressed(output)).equals(nars[n]!), `stored file ${n} is NAR ${n}`);
  // And again, now that the slots are spare: reused slots carry nothing over.
  const again = join(base, 'again.zst');
  await sets.stored(join(base, 'upload-again'), join(base, 'nar-2'), nars[2]!.length, again);
  t.ok((await decompressed(again)).equals(nars[2]!), 'a later upload through reused slots is right too');
  t.equal(sets.slotsInUse, 0, 'every frame slot is back');
  // An upload dropped midway gives its slots back too.
  sets.advance(join(base, 'upload-dropped'), join(base, 'nar-0'), 2 * FRAME_BYTES);
  await sets.discard(join(base, 'upload-dropped'));
  t.equal(sets.slotsInUse, 0, 'and after an upload is discarded mid-compression');
});
