// Staged bytes are written in batches (up to 1 MiB or 1024 pieces per writev): whatever the
// sizes of the received pieces, the file holds exactly the bytes, in order, at the right offset.
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { appendStagedBytes, writeStagedFile } from '../../../storage/nars/stagingFile.js';

async function* pieces(bytes: Buffer, sizes: (i: number) => number): AsyncGenerator<Uint8Array> {
  for (let at = 0, i = 0; at < bytes.length; i++) {
    const size = Math.min(sizes(i), bytes.length - at);
    yield bytes.subarray(at, at + size);
    at += size;
  }
}

t.test('staged bytes land whole, in order, for pieces of every size', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'kiln-staging-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const bytes = randomBytes(3 * (1 << 20) + 12345);
  const cases: [string, (i: number) => number][] = [
    ['tiny pieces (more than 1024 per MiB)', (i) => 1 + (i % 700)],
    ['network-sized pieces', (i) => 65536 + (i % 3) * 1000],
    ['pieces larger than a batch', () => 5 << 20],
  ];
  for (const [name, sizes] of cases) {
    const file = join(dir, `${name}.whole`);
    t.equal(await writeStagedFile(file, pieces(bytes, sizes), 1 << 30), bytes.length, `${name}: length`);
    t.ok((await readFile(file)).equals(bytes), `${name}: the very bytes`);
    const appended = join(dir, `${name}.chunks`);
    const half = 1_500_001;
    t.equal(await appendStagedBytes(appended, 0, pieces(bytes.subarray(0, half), sizes), 1 << 30), half);
    t.equal(await appendStagedBytes(appended, half, pieces(bytes.subarray(half), sizes), 1 << 30), bytes.length);
    t.ok((await readFile(appended)).equals(bytes), `${name}: appended at an offset`);
  }
});

t.test('a chunk past the limit fails and leaves the file at its offset', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'kiln-staging-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const file = join(dir, 'upload');
  const first = randomBytes(1000);
  await appendStagedBytes(file, 0, pieces(first, () => 100), 5000);
  await t.rejects(appendStagedBytes(file, 1000, pieces(randomBytes(2 << 20), () => 4096), 5000), { name: 'UploadProblem', message: /exceeds the limit/ });
  t.ok((await readFile(file)).equals(first), 'cut back to the 1000 bytes that count');
});
