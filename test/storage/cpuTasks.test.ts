// The CPU pool's tasks (storage/cpuWorker.ts and the task files it loads: nars/ingestTask.ts,
// nars/frameTasks.ts, nars/checkTasks.ts) normally run in piscina's worker threads, which tap's
// coverage does not reach: it records through an inspector session of the main thread only. Here
// they run in-process through the very entry point piscina calls (the default export of
// cpuWorker.ts), so their lines are measured; each answer is checked against one computed another
// way, and the main cases against the same task run in a real pool thread.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { valueSymbol } from 'piscina';
import t from 'tap';
import { hashNar, NarListingBuilder, renderNarListing, sha256Nix32 } from '../../protocol/index.js';
import { createCpuPool } from '../../storage/cpuPool.js';
import runCpuTask, { type CpuTaskInput, type CpuTaskName, type CpuTaskOutput } from '../../storage/cpuWorker.js';
import { zstdCompressBound } from '../../storage/nars/narFrames.js';
import { directoryNar } from '../support/narBytes.js';

const inProcess = <K extends CpuTaskName>(task: K, input: CpuTaskInput<K>) => runCpuTask({ task, input }) as Promise<CpuTaskOutput<K>>;

const present = '0c8mpcmk6vjh4wvcr8rdl91nr2ksdqk0';
const absent = '1d9nqdnl7wkj5xwds9sfm02os3ltrl11';
const contents = Buffer.alloc(300_000);
for (let i = 0; i < contents.length; i++) contents[i] = (i * 2654435761) >>> 24;
const nar = directoryNar([['a', contents], ['b', Buffer.from(`refers to /nix/store/${present}-dep\n`)]]);
const zstdDecompress = (file: string): Buffer => execFileSync('zstd', ['-d', '-c', file], { maxBuffer: 64 << 20 });

t.test('the CPU tasks in-process, checked against independent answers and a pool thread', async (t) => {
  const dir = t.testdir();
  const plain = join(dir, 'plain.nar');
  writeFileSync(plain, nar);
  const compressed = join(dir, 'nar.xz');
  writeFileSync(compressed, execFileSync('xz', ['-c'], { input: nar }));
  const digest = await hashNar([nar]);
  const builder = new NarListingBuilder();
  await hashNar([nar], {}, builder);
  const listing = renderNarListing(builder.listing);
  const pool = createCpuPool({ maxThreads: 1 });
  t.teardown(() => pool.destroy());

  t.test('sha256File', async (t) => {
    const expected = { hex: createHash('sha256').update(nar).digest('hex'), bytes: nar.length };
    t.same(await inProcess('sha256File', plain), expected);
    t.same(await pool.run('sha256File', plain), expected);
  });

  t.test('ingestStagedNar: a staged file that is gone rejects with ENOENT and the pool thread lives on', async (t) => {
    for (const compression of ['none', 'zstd', 'xz']) {
      const input = { source: join(dir, 'gone.nar'), compression, narSize: nar.length, references: [], zstdLevel: 1, output: join(dir, `gone-${compression}.zst`) };
      await t.rejects(inProcess('ingestStagedNar', input), { code: 'ENOENT' }, `in-process, ${compression}`);
      await t.rejects(pool.run('ingestStagedNar', input), /ENOENT/, `in a pool thread, ${compression}`);
      t.notOk(existsSync(input.output), 'no output file is left');
    }
    t.same(await pool.run('sha256File', plain), { hex: createHash('sha256').update(nar).digest('hex'), bytes: nar.length }, 'the thread still answers');
  });

  t.test('ingestStagedNar: decompresses, checks, lists and stores in zstd frames', async (t) => {
    const input = { source: compressed, compression: 'xz', narSize: nar.length, references: [present, absent], zstdLevel: 1 };
    const stored = join(dir, 'stored', 'nar.zst');
    const got = await inProcess('ingestStagedNar', { ...input, output: stored });
    t.same(got, {
      ok: true, narHash: digest.narHash, narSize: nar.length, listing, missingReferences: [absent],
      fileHash: sha256Nix32(createHash('sha256').update(readFileSync(stored)).digest()).slice('sha256:'.length), fileSize: readFileSync(stored).length,
    });
    t.ok(zstdDecompress(stored).equals(nar), 'the stored file is the NAR in zstd');
    t.same(await pool.run('ingestStagedNar', { ...input, output: null }), got, 'a pool thread gives the same, without a file');
    t.match(await inProcess('ingestStagedNar', { ...input, compression: '', source: plain, output: null }), { ok: true, narHash: digest.narHash }, '"" is none');

    const refused = async (change: Partial<typeof input>) => inProcess('ingestStagedNar', { ...input, output: join(dir, 'refused.zst'), ...change });
    t.match(await refused({ compression: 'lz4' }), { ok: false, field: 'Compression', reason: /unsupported compression "lz4"/ });
    t.same(await refused({ narSize: nar.length - 8 }), { ok: false, field: 'NarSize', reason: `the NAR is longer than the announced ${nar.length - 8} bytes` });
    const cut = join(dir, 'cut.nar');
    writeFileSync(cut, nar.subarray(0, nar.length - 16));
    t.match(await refused({ source: cut, compression: 'none' }), { ok: false, field: 'nar', reason: /^invalid NAR at byte \d+/ });
    const garbage = join(dir, 'garbage.xz');
    writeFileSync(garbage, Buffer.concat([readFileSync(compressed).subarray(0, 64), Buffer.alloc(64, 0x55)]));
    t.match(await refused({ source: garbage }), { ok: false, field: 'Compression', reason: /^the file is not valid xz: / });
    t.notOk(existsSync(join(dir, 'refused.zst')), 'a refused upload leaves no output file');
  });

  t.test('compressNarFrame: a byte range as one zstd frame, moved back or written into shared memory', async (t) => {
    const range = { source: plain, start: 4096, end: 200_000, zstdLevel: 1 };
    const expected = nar.subarray(range.start, range.end);
    const frameFile = (bytes: Uint8Array) => {
      const file = join(dir, `frame-${bytes.length}.zst`);
      writeFileSync(file, bytes);
      return zstdDecompress(file);
    };
    // In a thread piscina unwraps the moved bytes; in-process the marker itself comes back.
    const moved = (await inProcess('compressNarFrame', range)) as unknown as Record<symbol, Uint8Array>;
    t.ok(frameFile(moved[valueSymbol]!).equals(expected), 'in-process');
    t.ok(frameFile((await pool.run('compressNarFrame', range)) as Uint8Array).equals(expected), 'in a pool thread');
    const output = new SharedArrayBuffer(zstdCompressBound(range.end - range.start));
    const length = await inProcess('compressNarFrame', { ...range, output });
    t.type(length, 'number');
    t.ok(frameFile(new Uint8Array(output, 0, length as number)).equals(expected), 'into shared memory');
    await t.rejects(inProcess('compressNarFrame', { ...range, end: nar.length + 10 }), { message: /ends at byte \d+, inside the frame/ });
  });

  t.test('verifyStagedNar and scanStagedReferences: the check pass of an uncompressed NAR', async (t) => {
    const input = { source: plain, narSize: nar.length, references: [present, absent] };
    const expected = { ok: true, narHash: digest.narHash, narSize: nar.length, listing, missingReferences: [absent] };
    t.same(await inProcess('verifyStagedNar', input), expected);
    t.same(await pool.run('verifyStagedNar', input), expected);
    t.same(await inProcess('verifyStagedNar', { ...input, narSize: nar.length - 8 }), { ok: false, field: 'NarSize', reason: `the NAR is longer than the announced ${nar.length - 8} bytes` });
    t.match(await inProcess('verifyStagedNar', { ...input, source: join(dir, 'cut.nar') }), { ok: false, field: 'nar', reason: /^invalid NAR at byte/ });
    t.same(await inProcess('scanStagedReferences', input), { missingReferences: [absent] });
    t.same(await pool.run('scanStagedReferences', input), { missingReferences: [absent] });
    t.same(await inProcess('scanStagedReferences', { ...input, narSize: 100 }), { missingReferences: [present, absent] }, 'only the first narSize bytes count');
  });

  t.test('checkStagedBytes: the check followed chunk by chunk, dropped at a gap', async (t) => {
    const half = 150_001;
    t.equal(await inProcess('checkStagedBytes', { upload: 'u1', file: plain, from: 0, to: half }), half);
    t.equal(await inProcess('stagedCheckResult', { upload: 'u1', narSize: nar.length }), null, 'not the whole NAR yet');
    t.equal(await inProcess('checkStagedBytes', { upload: 'u1', file: plain, from: half, to: nar.length }), nar.length);
    t.match(await inProcess('stagedCheckResult', { upload: 'u1', narSize: nar.length }), { narHash: digest.narHash, narSize: nar.length, listing });
    t.equal(await inProcess('stagedCheckResult', { upload: 'u1', narSize: nar.length + 8 }), null, 'another size is not this check');
    await inProcess('dropStagedCheck', { upload: 'u1' });
    t.equal(await inProcess('stagedCheckResult', { upload: 'u1', narSize: nar.length }), null, 'dropped');
    t.equal(await inProcess('checkStagedBytes', { upload: 'u2', file: plain, from: 8, to: 16 }), null, 'a check starts at offset 0 only');
    t.equal(await inProcess('checkStagedBytes', { upload: 'u3', file: plain, from: 0, to: 8 }), 8);
    t.equal(await inProcess('checkStagedBytes', { upload: 'u3', file: plain, from: 16, to: 24 }), null, 'a gap drops the check');
    t.equal(await inProcess('checkStagedBytes', { upload: 'u4', file: plain, from: 0, to: nar.length + 8 }), null, 'a file shorter than its row drops it');
  });

  t.test('an unknown task is refused by name', async (t) => {
    t.throws(() => runCpuTask({ task: 'zstdCompress', input: null }), { message: /^unknown CPU task "zstdCompress"; known tasks: sha256File, ingestStagedNar, / });
  });
});
