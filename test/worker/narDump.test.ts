import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { dumpNar } from '../../worker/index.js';
import { buildFixturePaths, nixStoreDump, tempDir } from '../support/nixStore.js';

const collect = async (source: AsyncIterable<Uint8Array>): Promise<Buffer> => {
  const parts: Uint8Array[] = [];
  for await (const chunk of source) parts.push(chunk);
  return Buffer.concat(parts);
};

t.test('byte-identical to nix-store --dump for every fixture store path', async (t) => {
  for (const [name, path] of Object.entries(buildFixturePaths())) {
    const ours = await collect(dumpNar(path));
    t.ok(ours.equals(nixStoreDump(path)), `${name}: ${ours.length} bytes`);
  }
});

t.test('byte-identical for names Nix sorts by raw bytes, including non-UTF-8 ones', async (t) => {
  const root = join(tempDir('kiln-nar-dump-'), 'root');
  mkdirSync(root);
  const names = ['10', '9', '1', 'B', 'a', '\u00e9', '\uE000', '\u{1F4E6}', 'x'.repeat(255)];
  for (const name of names) writeFileSync(join(root, name), name);
  // Names are bytes on disk; Nix dumps them as they are.
  writeFileSync(Buffer.concat([Buffer.from(`${root}/`), Buffer.from([0xff, 0xfe, 0x41])]), 'latin-ish');
  mkdirSync(join(root, 'sub', 'deeper'), { recursive: true });
  writeFileSync(join(root, 'sub', 'run'), 'x'.repeat(200_000));
  chmodSync(join(root, 'sub', 'run'), 0o755);
  // Executable means "the owner may execute"; group or other bits alone do not count.
  writeFileSync(join(root, 'sub', 'group-exec'), '');
  chmodSync(join(root, 'sub', 'group-exec'), 0o654);
  symlinkSync('/nonexistent/target', join(root, 'sub', 'dangling'));
  for (const chunkBytes of [100, 4096, 256 * 1024]) {
    const ours = await collect(dumpNar(root, { chunkBytes }));
    t.ok(ours.equals(nixStoreDump(root)), `chunkBytes ${chunkBytes}: ${ours.length} bytes`);
  }
  const link = join(root, 'sub', 'dangling');
  t.ok((await collect(dumpNar(link))).equals(nixStoreDump(link)), 'a symlink root is dumped, not followed');
});

t.test('refuses what a NAR cannot hold', async (t) => {
  const dir = tempDir('kiln-nar-dump-fifo-');
  const fifo = join(dir, 'fifo');
  execFileSync('mkfifo', [fifo]);
  await t.rejects(collect(dumpNar(dir)), /a NAR holds only regular files, directories and symlinks/);
  await t.rejects(collect(dumpNar(join(dir, 'missing'))), { code: 'ENOENT' });
});
