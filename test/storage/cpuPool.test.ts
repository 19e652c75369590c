import t from 'tap';
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createCpuPool } from '../../storage/cpuPool.js';

const sha256sum = (path: string): string => execFileSync('sha256sum', [path], { encoding: 'utf8' }).split(' ')[0]!;

t.test('sha256File in a worker thread matches sha256sum', async (t) => {
  const dir = t.testdir({ 'empty.nar': '' });
  const big = join(dir, 'big.nar');
  // 3 MiB + 7 bytes of non-repeating content: several 1 MiB reads and a short tail.
  const content = Buffer.alloc(3 * 1_048_576 + 7);
  for (let i = 0; i < content.length; i++) content[i] = (i * 2654435761) >>> 24;
  writeFileSync(big, content);

  const pool = createCpuPool({ maxThreads: 2 });
  t.teardown(() => pool.destroy());
  const [bigHash, emptyHash] = await Promise.all([
    pool.run('sha256File', big),
    pool.run('sha256File', join(dir, 'empty.nar')),
  ]);
  t.same(bigHash, { hex: sha256sum(big), bytes: content.length });
  t.same(emptyHash, { hex: sha256sum(join(dir, 'empty.nar')), bytes: 0 });
  t.equal(pool.stats().completed, 2);
  // Errors cross the thread boundary as message and stack; properties such as `code` do not.
  await t.rejects(pool.run('sha256File', join(dir, 'missing.nar')), { message: /^ENOENT: no such file or directory, open '.*missing\.nar'$/ });
  // @ts-expect-error: the task table types the names; this checks the worker's own guard.
  await t.rejects(pool.run('zstdCompress', 'x'), { message: 'unknown CPU task "zstdCompress"; known tasks: sha256File' });
});

t.test('destroy() ends the threads; later runs are refused', async (t) => {
  const dir = t.testdir({ 'a.nar': 'hello\n' });
  const pool = createCpuPool({ maxThreads: 1 });
  t.equal((await pool.run('sha256File', join(dir, 'a.nar'))).bytes, 6);
  t.ok(pool.stats().threads >= 1);
  await pool.destroy();
  await pool.destroy();
  t.equal(pool.stats().threads, 0);
  await t.rejects(pool.run('sha256File', join(dir, 'a.nar')), { message: 'the CPU pool has been destroyed; cannot run sha256File' });
});

t.test('bad options are refused with the field named', async (t) => {
  t.throws(() => createCpuPool({ maxThreads: 0 }), new RangeError('createCpuPool maxThreads: expected an integer >= 1, got 0'));
});
