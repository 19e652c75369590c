// What slow readers of kept NAR files hold in the serving threads (http/serving/threadNarsKept.ts;
// review r7a-1): a kept file is written with tryEnd's backpressure, so uWS copies none of what a
// reader's socket does not take. Before, a small kept file was written with end(), and uWS copied
// what each slow reader's socket had not taken: many connections reading at a trickle held nearly
// a file each (1 MiB with the default nar.smallBytes; 10,000 connections, ~10 GiB).
//
// On loopback the kernel takes about a megabyte of each answer into the sockets' buffers, so the
// file here is a larger small file (nar.smallBytes raised): what the kernel leaves is what uWS held.
// uWS's copies are native memory, not V8's, so the measure is the process's RSS (the server runs in
// this process). The main thread also listens on the port; the bound allows its readers a copy
// each (the second test holds the main thread's own answers to none).
import { randomBytes } from 'node:crypto';
import t, { type Test } from 'tap';
import { holdOpen, readAll } from '../../support/heldReads.js';
import { startTestKiln } from '../../support/kiln.js';
import { signUp } from '../../support/accounts.js';
import { createTestCache } from '../../support/caches.js';
import { makeTestNar } from '../../support/narStorage.js';
import { uploadSingle } from '../../support/narUploads.js';
import { fetchFresh, threadSum } from '../../support/servingThreads.js';
import type { ReadPaceLimits } from '../../../storage/threadFace.js';

const MiB = 1 << 20;
/** Readers held at once: the answers' unread bytes stay on the server while the RSS is read. */
const READERS = 32;
const NO_PACE: ReadPaceLimits = { minBytesPerSec: 1, checkMs: 3_600_000 };

/** A kiln with `threads` serving threads and a 12 MiB NAR file in a public cache, small by its nar.smallBytes. */
async function keptSmallFile(t: Test, threads: number) {
  const kiln = await startTestKiln(t, { 'http.threads': threads, 'nar.smallBytes': 16 * MiB }, { narReadPace: NO_PACE });
  const owner = await signUp(kiln, 'owner');
  await createTestCache(kiln.sql, 'open', { public: true, ownerId: owner.id });
  const nar = await makeTestNar(t, { blob: randomBytes(12 * MiB) }, [], 'small');
  const uploaded = await uploadSingle(kiln, owner.token, 'open', {
    narinfo: { store_path: nar.info.storePath, nar_hash: nar.info.narHash, nar_size: nar.info.narSize, references: [] }, nar: nar.nar,
  });
  t.equal(uploaded.status, 200, JSON.stringify(uploaded.body));
  const [stored] = await kiln.sql<{ file_hash: string; file_size: string }[]>`select file_hash, file_size from cached_paths where hash_part = ${nar.hash}`;
  return { kiln, url: `${kiln.url}/cache/open/nar/${stored!.file_hash}.nar.zst`, size: Number(stored!.file_size) };
}

t.test('slow readers of a kept small file hold no copy of it each in the threads', async (t) => {
  const { kiln, url, size } = await keptSmallFile(t, 2);
  t.ok(size > 8 * MiB && size <= 16 * MiB, `a small file (${(size / MiB).toFixed(1)} MiB)`);
  // Every thread keeps it: fresh connections spread over the listeners.
  for (let round = 0; round < 2; round++) {
    const answers = await Promise.all(Array.from({ length: 12 }, () => fetchFresh(url)));
    t.ok(answers.every((a) => a.status === 200 && a.bytes.length === size), `round ${round}: the whole file`);
  }
  const fromMemory = threadSum(kiln.root.inspect(), 'narsFromMemory');
  t.ok(fromMemory > 0, 'threads answer it from memory');

  const before = process.memoryUsage().rss;
  const held = await Promise.all(Array.from({ length: READERS }, () => holdOpen(url)));
  await new Promise((r) => setTimeout(r, 500)); // what the sockets take, they have taken
  const grown = process.memoryUsage().rss - before;
  const inThreads = threadSum(kiln.root.inspect(), 'narsFromMemory') - fromMemory;
  const elsewhere = READERS - inThreads;
  t.comment(`RSS grew ${(grown / MiB).toFixed(0)} MiB for ${READERS} held readers of ${(size / MiB).toFixed(1)} MiB, ${inThreads} in the threads`);
  t.ok(inThreads >= READERS / 3, 'the threads answered many of them from memory');
  // Before: about (size - what the kernel took) for every reader, in the threads too.
  t.ok(grown < (elsewhere + 4) * size, `the threads' readers hold no copy each (RSS grew ${(grown / MiB).toFixed(0)} MiB; a copy per reader outside the threads and four more would be ${(((elsewhere + 4) * size) / MiB).toFixed(0)} MiB)`);
  const got = await Promise.all(held.map((res) => readAll(res)));
  t.ok(got.every((b) => b === size), 'every reader gets the whole file');
});

// The main thread's own listener (one event loop) answers a small file from its hot cache the same
// way: a stream of the one kept buffer under tryEnd, not end() (http/cache/narFile.ts).
t.test('slow readers of a small file from the main thread\'s memory hold no copy of it each', async (t) => {
  const { kiln, url, size } = await keptSmallFile(t, 1);
  const first = await fetchFresh(url);
  t.ok(first.status === 200 && first.bytes.length === size, 'the whole file, now in the hot cache');

  const before = process.memoryUsage().rss;
  const held = await Promise.all(Array.from({ length: READERS }, () => holdOpen(url)));
  await new Promise((r) => setTimeout(r, 500)); // what the sockets take, they have taken
  const grown = process.memoryUsage().rss - before;
  t.comment(`RSS grew ${(grown / MiB).toFixed(0)} MiB for ${READERS} held readers of ${(size / MiB).toFixed(1)} MiB`);
  // With end(): about (size - what the kernel took) for every reader, ~300 MiB here.
  t.ok(grown < 4 * size, `the readers hold no copy each (RSS grew ${(grown / MiB).toFixed(0)} MiB; four copies would be ${((4 * size) / MiB).toFixed(0)} MiB)`);
  const got = await Promise.all(held.map((res) => readAll(res)));
  t.ok(got.every((b) => b === size), 'every reader gets the whole file');
  const ranged = await fetch(url, { headers: { Range: 'bytes=100-199999' } });
  t.equal(ranged.status, 206);
  t.equal((await ranged.arrayBuffer()).byteLength, 199_900, 'a range of it, streamed the same way');
});
