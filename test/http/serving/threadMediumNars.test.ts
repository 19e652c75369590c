// Medium NAR files (above nar.smallBytes, up to 4 MiB) a serving thread keeps in memory once read
// (docs/http.md, "Serving threads"; issue 22, 2 MiB NARs): answered as the main thread's route
// answers them (the same bytes, headers and ranges, a slow reader included, whose answer waits on
// the socket's backpressure), and only under a live grant: a cache made private or a path deleted
// is never answered from any thread's memory.
import { randomBytes } from 'node:crypto';
import t from 'tap';
import { startTestKiln } from '../../support/kiln.js';
import { signUp } from '../../support/accounts.js';
import { createTestCache } from '../../support/caches.js';
import { makeTestNar } from '../../support/narStorage.js';
import { uploadSingle } from '../../support/narUploads.js';
import { fetchFresh, threadSum } from '../../support/servingThreads.js';

/** Requests per round: each on a connection of its own, so that they spread over the three listeners. */
const SPREAD = 12;


const statuses = async (url: string): Promise<number[]> =>
  [...new Set((await Promise.all(Array.from({ length: SPREAD }, () => fetchFresh(url)))).map((a) => a.status))];

t.test('medium NAR files from a thread\'s memory: the same answers, only under a live grant', async (t) => {
  const kiln = await startTestKiln(t, { 'http.threads': 2 });
  const owner = await signUp(kiln, 'owner');
  await createTestCache(kiln.sql, 'open', { public: true, ownerId: owner.id });
  // random bytes: the stored (zstd) file stays about 3 MiB, above nar.smallBytes (1 MiB)
  const nar = await makeTestNar(t, { blob: randomBytes(3 << 20) }, [], 'medium');
  const uploaded = await uploadSingle(kiln, owner.token, 'open', {
    narinfo: { store_path: nar.info.storePath, nar_hash: nar.info.narHash, nar_size: nar.info.narSize, references: [] }, nar: nar.nar,
  });
  t.equal(uploaded.status, 200, JSON.stringify(uploaded.body));
  const [stored] = await kiln.sql<{ file_hash: string; file_size: string }[]>`select file_hash, file_size from cached_paths where hash_part = ${nar.hash}`;
  t.ok(Number(stored!.file_size) > 1 << 20 && Number(stored!.file_size) <= 4 << 20, 'a medium file');
  const url = `${kiln.url}/cache/open/nar/${stored!.file_hash}.nar.zst`;
  const basic = { authorization: `Basic ${Buffer.from(`nix:${owner.token}`).toString('base64')}` };
  const reference = await fetchFresh(url, basic); // with credentials: the main thread's route
  t.equal(reference.status, 200);
  t.equal(reference.bytes.length, Number(stored!.file_size));

  const before = threadSum(kiln.root.inspect(), 'narsFromMemory');
  for (let round = 0; round < 3; round++) {
    const answers = await Promise.all(Array.from({ length: SPREAD }, () => fetchFresh(url)));
    t.same(new Set(answers.map((a) => `${a.status} ${a.type} ${a.cacheControl}`)), new Set([`200 ${reference.type} ${reference.cacheControl}`]), `round ${round}: answered as the route does`);
    t.ok(answers.every((a) => a.bytes.equals(reference.bytes)), `round ${round}: the same bytes`);
  }
  t.ok(threadSum(kiln.root.inspect(), 'narsFromMemory') > before, 'threads answered from memory');

  const slow = await Promise.all(Array.from({ length: 4 }, () => fetchFresh(url, {}, 300)));
  t.ok(slow.every((a) => a.status === 200 && a.bytes.equals(reference.bytes)), 'a reader that waits before reading gets every byte');

  const last = reference.bytes.length - 1;
  for (const [header, from, to] of [['bytes=10-99', 10, 99], [`bytes=1000-${last - 5}`, 1000, last - 5], ['bytes=-700000', last - 699_999, last]] as const) {
    const parts = await Promise.all(Array.from({ length: SPREAD }, () => fetchFresh(url, { range: header })));
    t.same(new Set(parts.map((a) => `${a.status} ${a.contentRange}`)), new Set([`206 bytes ${from}-${to}/${reference.bytes.length}`]), header);
    t.ok(parts.every((a) => a.bytes.equals(reference.bytes.subarray(from, to + 1))), `${header}: a range of the kept bytes`);
  }

  t.equal((await kiln.api('PATCH', '/caches/open', { token: owner.token, body: { public: false } })).status, 200);
  t.same(await statuses(url), [401], 'made private: no thread answers from memory');
  t.equal((await kiln.api('PATCH', '/caches/open', { token: owner.token, body: { public: true } })).status, 200);
  t.same(await statuses(url), [200]);
  t.equal((await kiln.api('DELETE', `/caches/open/nars/${nar.hash}`, { token: owner.token })).status, 200);
  t.same(await statuses(url), [404], 'its path deleted: no thread answers from memory');
});
